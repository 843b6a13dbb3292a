"""A tally's ratings as a character per step instead of JSON (issue 44: decoding them was half
of the quality page's time). Existing tallies are converted, not dropped: recounting 100,000
labels would fall on the first look at the quality page."""

from django.db import migrations, models

CHARS = {1: "+", 0: "0", -1: "-"}


def to_text(apps, schema_editor):
    SessionTally = apps.get_model("labeling", "SessionTally")
    batch = []
    for tally in SessionTally.objects.only("pk", "ratings").iterator(chunk_size=5000):
        ratings = {int(index): int(rating) for index, rating in tally.ratings or []}
        tally.ratings_text = "".join(
            CHARS[ratings[i]] if i in ratings else "." for i in range(max(ratings, default=-1) + 1)
        )
        batch.append(tally)
        if len(batch) == 5000:
            SessionTally.objects.bulk_update(batch, ["ratings_text"])
            batch = []
    SessionTally.objects.bulk_update(batch, ["ratings_text"])


def to_json(apps, schema_editor):
    SessionTally = apps.get_model("labeling", "SessionTally")
    values = {"+": 1, "0": 0, "-": -1}
    batch = []
    for tally in SessionTally.objects.only("pk", "ratings_text").iterator(chunk_size=5000):
        tally.ratings = [
            [i, values[char]] for i, char in enumerate(tally.ratings_text) if char != "."
        ]
        batch.append(tally)
    SessionTally.objects.bulk_update(batch, ["ratings"], batch_size=5000)


class Migration(migrations.Migration):
    dependencies = [("labeling", "0031_quality_tallies_and_shown_text")]

    operations = [
        migrations.AddField(
            model_name="sessiontally",
            name="ratings_text",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(to_text, to_json),
        migrations.RemoveField(model_name="sessiontally", name="ratings"),
        migrations.RenameField(
            model_name="sessiontally", old_name="ratings_text", new_name="ratings"
        ),
    ]
