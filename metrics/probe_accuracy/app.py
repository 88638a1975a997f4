"""The probe_accuracy Space: every compute argument as a form field; the headline accuracy and the breakdowns.

Run locally with ``python app.py`` (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address).
"""

import inspect
import json
from pathlib import Path

import evaluate
import gradio as gr

# The module in this folder, not a Hub copy: the Space shows what its own code computes.
metric = evaluate.load(str(Path(__file__).with_name("probe_accuracy.py")))
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
    items = [item.strip() for item in text.split(",")]
    return [int(i) if i.lstrip("-").isdigit() else {"true": True, "false": False}.get(i.lower(), i) for i in items]


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


def compute(
    predictions, references, groups, templates, positions, pairs, inverted, inverse_gap_reading, position_reading, num_choices
):
    kwargs = {
        "predictions": parse_list("predictions", predictions),
        "references": parse_list("references", references),
        "groups": parse_list("groups", groups),
        "templates": parse_list("templates", templates),
        "positions": parse_list("positions", positions),
        "pairs": parse_list("pairs", pairs),
        "inverted": parse_list("inverted", inverted),
        "inverse_gap_reading": inverse_gap_reading,
        "position_reading": position_reading,
        "num_choices": whole_number("num_choices", num_choices),
    }
    if kwargs["predictions"] is None or kwargs["references"] is None:
        raise gr.Error("predictions and references are required")
    try:
        result = metric.compute(**{k: v for k, v in kwargs.items() if v is not None})
    except (ValueError, TypeError) as error:
        raise gr.Error(str(error)) from None
    result = json.loads(json.dumps(result))  # JSON keys are strings (by_position is keyed by int)
    return result["accuracy"], result.get("macro_accuracy"), result.get("inverse_gap"), result


with gr.Blocks(title="Probe Accuracy") as demo:
    gr.Markdown(
        "# Probe Accuracy\nPROST / CConS accuracy with per-concept macro averages, position accuracy and "
        "superlative-inverse gaps. Lists as JSON (`[0, 1, 2]`) or comma-separated (`0, 1, 2`)."
    )
    with gr.Row():  # the form opens on an example that computes (accuracy 0.6, macro_accuracy 0.667)
        predictions = gr.Textbox(label="predictions", value="[0, 1, 2, 3, 1]")
        references = gr.Textbox(label="references", value="[0, 1, 3, 3, 0]")
    with gr.Row():
        groups = gr.Textbox(label="groups (optional)", value='["mass", "mass", "height", "height", "height"]')
        templates = gr.Textbox(label="templates (optional, needs groups)")
        positions = gr.Textbox(label="positions (optional)", placeholder="[1, 2, 4, 4]")
    with gr.Row():
        pairs = gr.Textbox(label="pairs (optional, with inverted)", placeholder='["mass_1", "mass_1"]')
        inverted = gr.Textbox(label="inverted (optional, with pairs)", placeholder="[false, true]")
        inverse_gap_reading = gr.Dropdown(
            ["pooled", "per_pair"], value=DEFAULTS["inverse_gap_reading"], label="inverse_gap_reading"
        )
        position_reading = gr.Dropdown(
            ["template_mean", "question_mean"], value=DEFAULTS["position_reading"], label="position_reading"
        )
        num_choices = gr.Textbox(label="num_choices (optional)", placeholder="4")
    button = gr.Button("Compute", variant="primary")
    with gr.Row():
        accuracy = gr.Number(label="accuracy")
        macro_accuracy = gr.Number(label="macro_accuracy")
        inverse_gap = gr.Number(label="inverse_gap")
    breakdown = gr.JSON(label="all results")
    fields = [
        predictions,
        references,
        groups,
        templates,
        positions,
        pairs,
        inverted,
        inverse_gap_reading,
        position_reading,
        num_choices,
    ]
    button.click(compute, fields, [accuracy, macro_accuracy, inverse_gap, breakdown], api_name="compute")
    demo.load(
        compute, fields, [accuracy, macro_accuracy, inverse_gap, breakdown], api_visibility="undocumented"
    )  # opens computed

if __name__ == "__main__":  # a Space runs `python app.py`; tests import the form's functions
    demo.launch(show_error=True)
