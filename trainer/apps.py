from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _create_cache_table(sender, using: str = "default", **kwargs) -> None:
    # The API throttles count in the database's cache table when no Redis cache is set
    # (settings.CACHES); every `migrate` makes sure it exists, so no deployment step can be
    # forgotten. createcachetable skips a table that exists and a cache that is not a table.
    from django.core.management import call_command

    call_command("createcachetable", database=using, verbosity=0)


class TrainerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "trainer"

    def ready(self) -> None:
        post_migrate.connect(_create_cache_table, sender=self)
        # Its receivers follow a model version that training records or activates.
        from trainer import pipeline  # noqa: F401

        # Uploads of public step-label datasets (ProcessBench, PRMBench, TRL) become import
        # jobs like labeling's own; labeling cannot import the trainer, so it is told here.
        from trainer.sampling.imported import register_import_jobs

        register_import_jobs()
        # The quality page compares human first errors with those of the label sources that
        # place one (labeling cannot import the trainer's registry of them).
        from labeling.first_error import Source, register_sources
        from trainer.training import label_sources

        register_sources(
            lambda: [
                Source(
                    name=s.name,
                    title=s.first_error.title,
                    labeled=s.first_error.labeled,
                    positions=s.first_error.positions,
                )
                for s in label_sources.first_error_sources()
            ]
        )
        # The workbench shows (and the quality page compares) the newest judge labels of a
        # solution, as the generation's judge display says; labeling cannot import judging.
        from labeling.judge_display import register_reader
        from trainer.judging.selectors import judged_solution_ids, newest_judge_labels

        register_reader(newest_judge_labels, judged=judged_solution_ids)
