"""torch's CPU threads as physprobe sets them (``physprobe.backends.hf.threads``): one for a small model whatever the
machine, more for a large one up to the cores this process may use, none changed where the user set
``OMP_NUM_THREADS`` or the model is on a GPU."""

import os

import pytest
import torch

from physprobe.backends.hf import threads


@pytest.fixture
def torch_threads():
    """torch's threads as they were before the test, set back after it."""
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_threads_follow_the_models_size_up_to_the_cores():
    assert [threads.threads_for(n, cores=4) for n in (135e6, 999e6, 1e9, 2.5e9, 70e9)] == [1, 1, 1, 2, 4]
    assert threads.threads_for(8e9, cores=1) == 1


def test_the_cores_are_those_this_process_may_use():
    assert threads.cores() == len(os.sched_getaffinity(0))


def test_a_small_model_on_the_cpu_computes_on_one_thread(torch_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cores", lambda: 2)
    torch.set_num_threads(2)
    model = torch.nn.Linear(64, 64)  # 4,160 parameters
    assert threads.choose(model, torch.device("cpu")) == 1 == torch.get_num_threads()


def test_the_users_choice_and_a_gpu_model_are_left_as_they_are(torch_threads, monkeypatch):
    model = torch.nn.Linear(64, 64)
    torch.set_num_threads(2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.choose(model, torch.device("cpu")) == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads.choose(model, torch.device("cuda")) == 2  # a model on a GPU: its CPU threads only feed the device
