"""The three metric Spaces start as a Space would (each folder on its own, its pinned gradio) and compute the
papers' figures: called through gradio_client, and once through a real headless browser filling the form.

Expected values are worked by hand from the metric definitions (see each case's comment).
"""

import os
import shutil
import socket
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from .browser import launch_options
from .conftest import REPO
from .olah_hub import free_port

METRICS = ("affordance_rank", "agreement_accuracy", "probe_accuracy")


def front_matter(name):
    return yaml.safe_load((REPO / "metrics" / name / "README.md").read_text().split("---\n")[1])


@pytest.mark.parametrize("name", METRICS)
def test_space_pins_what_the_tests_run(name):
    """The card's gradio and the requirements are the versions these tests start the app with."""
    meta = front_matter(name)
    assert meta["sdk"] == "gradio" and meta["sdk_version"] == version("gradio") and meta["app_file"] == "app.py"
    pins = dict(line.split("==") for line in (REPO / "metrics" / name / "requirements.txt").read_text().splitlines()
                if line and not line.startswith("#"))  # fmt: skip
    assert pins == {pkg: version(pkg) for pkg in ("evaluate", "datasets", "huggingface_hub", "numpy")}
    assert int(pins["huggingface_hub"].split(".")[0]) >= 1 and pins["datasets"].startswith("5.")


@pytest.fixture(scope="module")
def spaces(tmp_path_factory):
    """Each metric folder copied alone (as a Space holds it) and its app.py started on loopback; stops by itself."""
    root = tmp_path_factory.mktemp("spaces")
    servers, urls = [], {}
    for name in METRICS:
        folder = root / name
        shutil.copytree(REPO / "metrics" / name, folder, ignore=shutil.ignore_patterns("__pycache__"))
        port = free_port()
        env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False",
               "HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf"), "PYTHONPATH": ""}  # fmt: skip
        # `timeout` ends the server even if this process dies before the finaliser runs.
        servers.append(subprocess.Popen(["timeout", "900", sys.executable, "app.py"], cwd=folder, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))  # fmt: skip
        urls[name] = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 240
        for server, url in zip(servers, urls.values()):
            port = int(url.rsplit(":", 1)[1].strip("/"))
            while True:
                if server.poll() is not None:
                    pytest.fail(f"{url} exited: {server.stderr.read().decode()[-2000:]}")
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    pytest.fail(f"{url} did not start within 240 s")
                time.sleep(0.5)
        yield urls
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


def client(url):
    from gradio_client import Client

    return Client(url, verbose=False)


@pytest.mark.slow
def test_probe_accuracy_space(spaces):
    # Templates d1 (2 of 3 right) and d2 (1 of 1) average to 0.8333 for "dir"; m1 is 1 of 2 -> "mass" 0.5;
    # macro = (0.8333 + 0.5) / 2; micro accuracy = 4 of 6.
    accuracy, macro, gap, result = client(spaces["probe_accuracy"]).predict(
        "[0, 0, 0, 1, 2, 2]", "0, 0, 1, 1, 2, 3", '["dir", "dir", "dir", "dir", "mass", "mass"]',
        '["d1", "d1", "d1", "d2", "m1", "m1"]', "", "", "", "per_pair", "template_mean", None, api_name="/compute",
    )  # fmt: skip
    assert accuracy == pytest.approx(4 / 6) and macro == pytest.approx((5 / 6 + 0.5) / 2) and gap is None
    assert result["by_group"]["dir"]["accuracy"] == pytest.approx(5 / 6)
    # Pair mass_1: side a 2 of 2 right, inverted side b 1 of 2 -> gap 0.5; position 1: 1 of 2, position 2: 2 of 2.
    accuracy, _, gap, result = client(spaces["probe_accuracy"]).predict(
        "[0, 1, 1, 1]", "[0, 1, 0, 1]", "", "", "[1, 2, 1, 2]", '["mass_1", "mass_1", "mass_1", "mass_1"]',
        "[false, false, true, true]", "per_pair", "question_mean", None, api_name="/compute",
    )  # fmt: skip
    assert (accuracy, gap) == (0.75, 0.5) and result["by_position"]["1"]["accuracy"] == 0.5


@pytest.mark.slow
def test_agreement_accuracy_space(spaces):
    # Right on questions 1, 2, 4 with agreements 1.0, 0.75, 0.75: (1 + 0.75 + 0.75) / 4 = 0.625; "sharp": 0.75 / 2.
    agreement, accuracy, result = client(spaces["agreement_accuracy"]).predict(
        "[0, 2, 2, 0]", "[0, 2, 0, 0]", "[1.0, 0.75, 1.0, 0.75]", '["soft", "soft", "sharp", "sharp"]', "per_question",
        api_name="/compute",
    )  # fmt: skip
    assert (agreement, accuracy) == (0.625, 0.75) and result["by_group"]["sharp"]["agreement_accuracy"] == 0.375


@pytest.mark.slow
def test_affordance_rank_space(spaces):
    # Pair 1: positives 0.9 and 0.7 above both negatives (0.5, 0.1); pair 2: 0.8 above all; pair 3 has no positive.
    accuracy, mean_ap, result = client(spaces["affordance_rank"]).predict(
        "[[0.9, 0.5, 0.7, 0.1], [0.2, 0.8, 0.3, 0.6], [0.4, 0.4, 0.1, 0.3]]", "[[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]]",
        "strict", "micro", None, api_name="/compute",
    )  # fmt: skip
    assert (accuracy, mean_ap, result["n"], result["skipped"]) == (1.0, 1.0, 2, 1)
    # Pairwise: positives 0.5 and 0.7 each beat the negative 0.1 but not 0.9: 2 of 4 pairs = 0.5.
    # Ranking 0.9(-) 0.7(+) 0.5(+) 0.1(-): AP = (1/2 + 2/3) / 2.
    accuracy, mean_ap, _ = client(spaces["affordance_rank"]).predict(
        "[[0.5, 0.9, 0.7, 0.1]]", "[[1, 0, 1, 0]]", "pairwise", "micro", None, api_name="/compute"
    )
    assert accuracy == 0.5 and mean_ap == pytest.approx((1 / 2 + 2 / 3) / 2)


def browser():
    """Playwright and the options that launch Debian's chromium (a failure naming the fix where there is none)."""
    from playwright.sync_api import sync_playwright

    return sync_playwright(), launch_options()


def settled(page, labels, seconds=60):
    """The values of the output fields ``labels`` once a result has arrived (the "all results" JSON shows its first
    key: gradio's number fields read 0 until then, for as long as the page's load event takes) and two reads half
    a second apart agree (under load gradio can show a transient value while a result arrives)."""
    fields = [page.get_by_label(label, exact=True) for label in labels]
    values, deadline = None, time.monotonic() + seconds
    while time.monotonic() < deadline:
        page.wait_for_timeout(500)
        arrived = f'"{labels[0]}"' in page.locator("body").inner_text()
        current = tuple(field.input_value() for field in fields)
        if arrived and all(current) and current == values:
            break
        values = current
    return values


def screenshot_path(tmp_path, name):
    """Where a test's screenshot goes: $PHYSPROBE_SCREENSHOTS (a folder, to look at them), else the test's tmp folder."""
    folder = Path(os.environ.get("PHYSPROBE_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.png"


# What each Space shows when it opens, before anyone types: its example's figures, worked by hand.
OPENING = {
    # 3 of 5 right; mass 2 of 2, height 1 of 3: macro (1 + 1/3) / 2.
    "probe_accuracy": {"accuracy": 0.6, "macro_accuracy": 2 / 3},
    # Right on questions 1, 2, 4 with agreements 1.0, 0.75, 0.75: 2.5 / 4; plain 3 of 4.
    "agreement_accuracy": {"agreement_accuracy": 0.625, "accuracy": 0.75},
    # Pair 1: positives 0.5 and 0.7 each beat 0.1, not 0.9 (2 of 4); pair 2: 0.8 beats all three: 5 of 7.
    # AP: ranking 0.9(-) 0.7(+) 0.5(+) 0.1(-) gives (1/2 + 2/3) / 2; pair 2's positive ranks first: 1.
    "affordance_rank": {"accuracy": 5 / 7, "map": ((1 / 2 + 2 / 3) / 2 + 1) / 2},
}


@pytest.mark.parametrize("name", METRICS)
def test_each_space_computes_its_opening_example_in_process(name, monkeypatch):
    """The quick sibling of the browser and server tests: app.py run as a Space runs it (from its own folder, its
    metric module beside it), no server started; its opening event's inputs, as the form holds them, give the
    example's figures; a list that is not one is a form error."""
    import importlib.util

    import gradio as gr

    monkeypatch.chdir(REPO / "metrics" / name)
    spec = importlib.util.spec_from_file_location(f"space_{name}", REPO / "metrics" / name / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    opening = [f for f in app.demo.fns.values() if f.name == "compute"][-1]  # demo.load: the form opens computed
    values = [component.value for component in opening.inputs]
    shown = dict(zip([component.label for component in opening.outputs], opening.fn(*values)))
    assert [shown[label] for label in OPENING[name]] == pytest.approx(list(OPENING[name].values()))
    with pytest.raises(gr.Error, match="predictions: not a JSON list"):
        opening.fn("[0, 1", *values[1:])


@pytest.mark.slow
@pytest.mark.parametrize("name", METRICS)
@pytest.mark.browser
def test_every_space_opens_on_an_example_that_computes(spaces, tmp_path, name):
    """Chromium opens the Space: its form holds an example, the page shows that example's figures with no error,
    and Compute on the untouched form gives them again."""
    manager, options = browser()
    expected = OPENING[name]
    with manager as playwright:
        chromium = playwright.chromium.launch(**options)
        page = chromium.new_page(viewport={"width": 1200, "height": 900})
        page.goto(spaces[name], timeout=120_000)
        opened = settled(page, list(expected))
        text = page.locator("body").inner_text()
        page.screenshot(path=str(screenshot_path(tmp_path, f"{name}-opened")), full_page=True)
        page.get_by_role("button", name="Compute").click()
        computed = settled(page, list(expected))
        text += page.locator("body").inner_text()
        chromium.close()
    assert [float(v) for v in opened] == pytest.approx(list(expected.values()))
    assert [float(v) for v in computed] == pytest.approx(list(expected.values()))
    assert "Error" not in text


@pytest.mark.slow
@pytest.mark.browser
def test_agreement_accuracy_form_in_a_real_browser(spaces, tmp_path):
    manager, options = browser()
    with manager as playwright:
        chromium = playwright.chromium.launch(**options)
        page = chromium.new_page(viewport={"width": 1200, "height": 900})
        page.goto(spaces["agreement_accuracy"], timeout=120_000)
        settled(page, ["agreement_accuracy", "accuracy"])  # the opening example's figures, then the typed ones
        page.get_by_label("predictions").fill("0, 2, 2, 2")
        page.get_by_label("references").fill("0, 2, 0, 0")
        page.get_by_label("agreements (optional)").fill("[1.0, 0.75, 1.0, 0.5]")
        page.get_by_label("groups (optional)").fill("")
        page.get_by_role("button", name="Compute").click()
        page.wait_for_timeout(1000)
        values = settled(page, ["agreement_accuracy", "accuracy"])
        page.screenshot(path=str(screenshot_path(tmp_path, "agreement_accuracy-typed")), full_page=True)
        chromium.close()
    # Right on questions 1 and 2 (agreements 1.0, 0.75): 1.75 / 4; plain 2 of 4.
    assert tuple(float(v) for v in values) == (0.4375, 0.5)


@pytest.mark.slow
def test_an_optional_number_left_empty_is_not_given_and_zero_is_refused(spaces):
    """num_choices and k open empty (the module's default) and a typed 0 reaches the module, which refuses it."""
    from gradio_client.exceptions import AppError

    accuracy, *_ = client(spaces["probe_accuracy"]).predict(
        "[0, 1]", "[0, 0]", "", "", "", "", "", "per_pair", "template_mean", "", api_name="/compute"
    )
    assert accuracy == 0.5
    with pytest.raises(AppError, match="num_choices must be a whole number of at least 1, got 0"):
        client(spaces["probe_accuracy"]).predict("[0, 1]", "[0, 0]", "", "", "", "", "", "per_pair", "template_mean", "0",
                                                 api_name="/compute")  # fmt: skip
    with pytest.raises(AppError, match="k must be at least 1, got 0"):
        client(spaces["affordance_rank"]).predict("[[0.9, 0.1]]", "[[1, 0]]", "pairwise", "micro", "0", api_name="/compute")
