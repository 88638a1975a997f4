"""The suite's own scheduling (``tests/conftest.py``): under ``--dist loadgroup`` (setup.cfg's addopts) the tests of
one xdist group run on one worker, so that the real llama.cpp server, and each module-scoped fixture, is made once
per run, not once per worker. pytest-xdist names each grouped test after its group (``...::test_x@llama_server``) and
sends tests by that name; a pytest that drops the name (pytest 9.2, pytest-xdist#1386) spreads every group over the
workers without a word, so this module checks the names the workers were given."""

import os

import pytest

from .conftest import first


def grouped(request) -> bool:
    """Whether this run hands tests out by group (pytest-xdist's ``--dist loadgroup``)."""
    # A worker's options: pytest-xdist sets ``loadgroup`` there from the controller's ``--dist``.
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) and bool(getattr(request.config.option, "loadgroup", False))


@pytest.fixture(scope="module")
def made_once():
    return object()


def test_a_test_sharing_a_module_fixture_is_sent_with_its_module(request, made_once):
    if not grouped(request):
        pytest.skip("tests are handed out by group only under -n N --dist loadgroup (setup.cfg's addopts)")
    assert request.node.nodeid.endswith("::test_a_test_sharing_a_module_fixture_is_sent_with_its_module@test_suite_groups")


def test_every_server_test_is_in_the_servers_group_and_the_longest_come_first(request):
    items = request.session.items
    servers = [item for item in items if "llama_server" in item.fixturenames]
    assert all(item.get_closest_marker("server") for item in servers)
    if grouped(request):
        assert all(item.nodeid.endswith("@llama_server") for item in servers), [i.nodeid for i in servers]
    order = [first(item) for item in items]
    assert order == sorted(order)  # the venv tests, then the server's, then the rest
