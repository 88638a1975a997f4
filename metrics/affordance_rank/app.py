import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("physprobe/affordance_rank")
launch_gradio_widget(module)
