"""The import contracts of pyproject.toml (STYLE rule 16, README "Architecture") inside the suite.

``make lint`` runs lint-imports; these tests make ``make test`` fail on a new upward import too,
and check what lint-imports cannot know: that every app of the project is in the contract, and
that every upward edge the layers let through starts in a protected interface."""

from pathlib import Path

from django.apps import apps
from importlinter.api import read_configuration
from importlinter.application.use_cases import lint_imports

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = str(ROOT / "pyproject.toml")


def _contracts() -> dict[str, dict]:
    return {c["id"]: c for c in read_configuration(PYPROJECT)["contracts_options"]}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_import_contracts_are_kept():
    # lint-imports prints the broken contracts with their import chains; pytest shows that output.
    assert lint_imports(config_filename=PYPROJECT, cache_dir=None, no_logo=True), "see the broken contracts above"


def test_every_app_of_the_project_is_a_layer():
    project_apps = {c.name for c in apps.get_app_configs() if Path(c.path).resolve().parent == ROOT}
    layers = _contracts()["layers"]["layers"]
    assert project_apps == set(layers) - {"config"}
    assert set(read_configuration(PYPROJECT)["session_options"]["root_packages"]) == set(layers)


def test_every_exception_to_the_layers_starts_in_a_protected_interface():
    contracts = _contracts()
    interfaces = contracts["interfaces"]["protected_modules"]
    for ignored in contracts["layers"].get("ignore_imports", []):
        importer = ignored.split("->")[0].strip().removesuffix(".**").removesuffix(".*")
        assert any(_within(importer, i) for i in interfaces), f"{ignored!r}: declare {importer} an interface"


def test_the_layers_excuse_no_upward_import():
    """Every page that calls several apps lives in the top app: no app imports a higher one."""
    assert _contracts()["layers"].get("ignore_imports", []) == []
