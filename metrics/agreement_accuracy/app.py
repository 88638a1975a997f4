"""The agreement_accuracy Space: every compute argument as a form field; the headline agreement and the breakdowns.

Run locally with ``python app.py`` (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address).
"""

import inspect
import json
from pathlib import Path

import evaluate
import gradio as gr

# The module in this folder, not a Hub copy: the Space shows what its own code computes.
metric = evaluate.load(str(Path(__file__).with_name("agreement_accuracy.py")))
DEFAULTS = {name: p.default for name, p in inspect.signature(type(metric)._compute).parameters.items()}  # the form opens on them


def parse_list(name, text):
    """A JSON list, or comma-separated values; empty means not given."""
    text = (text or "").strip()
    if not text:
        return None
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise gr.Error(f"{name}: not a JSON list ({error})") from None
    return [_value(item.strip()) for item in text.split(",")]


def _value(item):
    """A comma-separated item: a JSON number or literal where it is one (``0.75``, ``true``), else the text."""
    try:
        return json.loads(item)
    except json.JSONDecodeError:
        return item


def compute(predictions, references, agreements, groups, reading):
    kwargs = {
        "predictions": parse_list("predictions", predictions),
        "references": parse_list("references", references),
        "agreements": parse_list("agreements", agreements),
        "groups": parse_list("groups", groups),
        "reading": reading,
    }
    if kwargs["predictions"] is None or kwargs["references"] is None:
        raise gr.Error("predictions and references are required")
    try:
        result = metric.compute(**{k: v for k, v in kwargs.items() if v is not None})
    except (ValueError, TypeError) as error:
        raise gr.Error(str(error)) from None
    result = json.loads(json.dumps(result))  # JSON keys are strings (by_position is keyed by int)
    return result.get("agreement_accuracy"), result["accuracy"], result


with gr.Blocks(title="Agreement Accuracy") as demo:
    gr.Markdown(
        "# Agreement Accuracy\nNEWTON's agreement-weighted accuracy (Eq. 1) with plain accuracy and per-group "
        "figures. Lists as JSON (`[0, 2, 2]`) or comma-separated (`0, 2, 2`)."
    )
    with gr.Row():  # the form opens on an example that computes (agreement_accuracy 0.625, accuracy 0.75)
        predictions = gr.Textbox(label="predictions", value="[0, 2, 2, 0]")
        references = gr.Textbox(label="references", value="[0, 2, 0, 0]")
    with gr.Row():
        agreements = gr.Textbox(label="agreements (optional)", value="[1.0, 0.75, 1.0, 0.75]")
        groups = gr.Textbox(label="groups (optional)", value='["soft", "soft", "sharp", "sharp"]')
        reading = gr.Dropdown(["per_question", "global"], value=DEFAULTS["reading"], label="reading")
    button = gr.Button("Compute", variant="primary")
    with gr.Row():
        agreement_accuracy = gr.Number(label="agreement_accuracy")
        accuracy = gr.Number(label="accuracy")
    breakdown = gr.JSON(label="all results")
    button.click(
        compute,
        [predictions, references, agreements, groups, reading],
        [agreement_accuracy, accuracy, breakdown],
        api_name="compute",
    )
    demo.load(
        compute,
        [predictions, references, agreements, groups, reading],
        [agreement_accuracy, accuracy, breakdown],
        api_visibility="undocumented",
    )  # the page opens on the example's figures

if __name__ == "__main__":  # a Space runs `python app.py`; tests import the form's functions
    demo.launch(show_error=True)
