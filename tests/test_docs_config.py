"""docs/config.md is the schema's own reference: regenerated, it must be what is committed."""
from pathlib import Path

from trainer_cli.config.reference import config_reference

ROOT = Path(__file__).resolve().parents[1]


def test_config_reference_is_current():
    committed = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == config_reference(ROOT / "configs"), (
        "docs/config.md is stale: run `python -m trainer_cli.config.reference > docs/config.md`")


def test_every_schema_key_is_documented():
    from trainer_cli.config.schema import RunConfig
    text = config_reference(ROOT / "configs")
    for key in RunConfig.model_fields:
        assert f"| `{key}" in text
