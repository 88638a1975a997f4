"""The affordance_rank Space: every compute argument as a form field; the headline accuracy and mAP.

Run locally with ``python app.py`` (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address).
"""

import inspect
import json
from pathlib import Path

import evaluate
import gradio as gr

# The module in this folder, not a Hub copy: the Space shows what its own code computes.
metric = evaluate.load(str(Path(__file__).with_name("affordance_rank.py")))
DEFAULTS = {name: p.default for name, p in inspect.signature(type(metric)._compute).parameters.items()}  # the form opens on them


def parse_rows(name, text):
    """A JSON list of lists (one row of per-class values per sentence-object pair)."""
    try:
        rows = json.loads(text or "")
    except json.JSONDecodeError as error:
        raise gr.Error(f"{name}: not a JSON list of lists ({error})") from None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise gr.Error(f"{name}: expected a list of lists such as [[0.9, 0.1], [0.2, 0.8]]")
    return rows


def whole_number(name, text):
    """An optional whole number typed in a text field: empty means not given; anything else is passed on as
    read (0 included, for the module to refuse), never dropped."""
    text = "" if text is None else str(text).strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise gr.Error(f"{name}: not a number ({text!r})") from None
    return int(value) if value.is_integer() else value


def compute(predictions, references, mode, average, k):
    kwargs = {"mode": mode, "average": average}
    if whole_number("k", k) is not None:
        kwargs["k"] = whole_number("k", k)
    try:
        result = metric.compute(predictions=parse_rows("predictions", predictions),
                                references=parse_rows("references", references), **kwargs)  # fmt: skip
    except (ValueError, TypeError) as error:
        raise gr.Error(str(error)) from None
    result = json.loads(json.dumps(result))  # JSON keys are strings (by_position is keyed by int)
    return result["accuracy"], result["map"], result


with gr.Blocks(title="Affordance Rank") as demo:
    gr.Markdown(
        "# Affordance Rank\nText2Afford's rank-based accuracy and mAP of per-class affordance scores. One row "
        "per sentence-object pair: `predictions` scores, `references` 0/1 labels, as JSON lists of lists."
    )
    with gr.Row():  # the form opens on an example that computes (pairwise accuracy 5/7, mAP 0.792)
        predictions = gr.Textbox(label="predictions", lines=3, value="[[0.5, 0.9, 0.7, 0.1], [0.2, 0.8, 0.3, 0.6]]")
        references = gr.Textbox(label="references", lines=3, value="[[1, 0, 1, 0], [0, 1, 0, 0]]")
    with gr.Row():
        mode = gr.Dropdown(["strict", "pairwise"], value=DEFAULTS["mode"], label="mode")
        average = gr.Dropdown(["micro", "macro"], value=DEFAULTS["average"], label="average")
        k = gr.Textbox(label="k (optional, mAP@k)", placeholder="all classes")
    button = gr.Button("Compute", variant="primary")
    with gr.Row():
        accuracy = gr.Number(label="accuracy")
        mean_ap = gr.Number(label="map")
    breakdown = gr.JSON(label="all results")
    button.click(compute, [predictions, references, mode, average, k], [accuracy, mean_ap, breakdown], api_name="compute")
    demo.load(
        compute, [predictions, references, mode, average, k], [accuracy, mean_ap, breakdown], api_visibility="undocumented"
    )  # the page opens on the example's figures

if __name__ == "__main__":  # a Space runs `python app.py`; tests import the form's functions
    demo.launch(show_error=True)
