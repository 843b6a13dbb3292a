"""Give the admin role the guideline permissions and write the first labeling guideline.

The text paraphrases the public PRM800K phase-2 labeling instructions; admins edit it in
the Django admin (a newer guideline replaces it on the page).
"""

from django.db import migrations

TITLE = "How to rate the steps of a solution"

BODY = r"""
You see a math problem, its ground-truth answer, and a solution written by a model. The
solution is shown **one step at a time**. Rate each step before you see the next one.
Judge each step on its own merits: is it right, and does it move the solution forward?

## The three ratings

| rating | key | use it when the step |
|---|---|---|
| **+1** good | `3` or `+` | is correct and makes progress towards the answer |
| **0** okay | `2` or `0` | is correct but adds nothing: it restates the problem, repeats earlier work, or explores an idea that goes nowhere without being wrong |
| **-1** bad | `1` or `-` | is wrong, cannot be checked, or derails the solution |

A step is **-1** when it contains a false statement or a calculation error (for example
claiming $\frac{3}{4} + \frac{1}{4} = \frac{4}{8}$), when it relies on a fact that is not
true or not established, when it is so vague or garbled that you cannot verify it, or when
it takes the solution somewhere that cannot lead to the answer (solving a different
problem, misreading what is asked). A step that is *merely* unnecessary is 0, not -1.

When you are unsure, choose the rating you believe is most likely and mark the step
**unsure** (`u`). Do not use 0 as a way of saying "I don't know".

## When to stop

- **The first -1 ends the solution.** Later steps are not shown: everything after an error
  is built on it. The label is submitted as *found an error*.
- **The last step** (the one with `# Answer`) ends the solution when you rate it. Rate the
  final answer against the ground-truth answer: an answer equal in value but written
  differently (say $0.5$ and $\frac{1}{2}$) is correct; a wrong final answer is -1.
- Until you submit, you can go back (`Backspace` or `k`) and change a rating. Changing a
  -1 to 0 or +1 brings the following steps back.

## Giving up and bad problems

- **Report bad problem** when the problem itself is broken: its statement is ambiguous or
  incomplete, or the ground-truth answer is wrong. Say in a few words what is wrong.
- **Give up** when you cannot judge a step even after a careful look (it needs knowledge
  you do not have, or checking it would take unreasonably long). Say why.

Both end the solution; your ratings so far are kept.

## Quality control

Some solutions are served to every labeler and compared with a reference label (the
*gold*): new labelers start with a few screening questions, and quality-control
questions appear among the others. Label them exactly like any other solution. Your
agreement with the gold is shown on your home page.
""".strip()

GUIDELINE_PERMISSIONS = {
    "admin": ["add_guideline", "change_guideline", "delete_guideline", "view_guideline"],
    "researcher": ["view_guideline"],
}


def forwards(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; make sure they exist now.
    app_config = apps.get_app_config("labeling")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0)
    app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in GUIDELINE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="labeling", codename__in=codenames)
        )

    Guideline = apps.get_model("labeling", "Guideline")
    if not Guideline.objects.exists():
        Guideline.objects.create(title=TITLE, body=BODY)


def backwards(apps, schema_editor):
    apps.get_model("labeling", "Guideline").objects.filter(title=TITLE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0005_quality_gold_and_guidelines"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
