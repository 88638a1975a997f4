"""Dataset cards as a Hub user expects them: arXiv links and tags, a truthful license, Uses and Limitations
near the top."""

import pytest
import yaml

ARXIV = {"cccons": "2306.02258", "newton": "2310.07018", "prost": "2106.03634", "text2afford": "2402.12881"}


@pytest.mark.parametrize("benchmark", sorted(ARXIV))
def test_card_front_matter_and_sections(built_all, benchmark):
    text = (built_all / benchmark / "README.md").read_text()
    meta = yaml.safe_load(text.split("---\n")[1])
    body = text.split("---\n", 2)[2]
    assert f"arxiv:{ARXIV[benchmark]}" in meta["tags"] and {"physical-reasoning", "affordance"} & set(meta["tags"])
    assert f"https://arxiv.org/abs/{ARXIV[benchmark]}" in body
    uses, limitations, configs = (body.index(h) for h in ("## Uses", "## Limitations", "## Configs"))
    assert uses < limitations < configs  # after the summary, before the reference sections
    assert "$" not in body[uses:configs]  # no unfilled placeholder


def test_licenses_are_stated_truthfully(built_all):
    licenses = {b: yaml.safe_load((built_all / b / "README.md").read_text().split("---\n")[1])["license"] for b in ARXIV}
    # SOURCES.md: CConS MIT, PROST Apache-2.0, NEWTON none stated upstream, Text2Afford MIT per its README.
    assert licenses == {"cccons": "mit", "newton": "unknown", "prost": "apache-2.0", "text2afford": "mit"}
    assert "zero-shot only" in (built_all / "prost" / "README.md").read_text().lower()
