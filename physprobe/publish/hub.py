"""Talking to the Hub when publishing: repo ids checked before any work, the token, write access, and each repo
folder made the content of its Hub repository (``upload_folder``), retried on transient errors, then all tagged.

>>> check_repo_ids("physprobe", ["prost"])
>>> release_line({"physprobe/prost": "committed"}, None)
'release complete: 1 of 1 repositories published'
"""

from __future__ import annotations

import os

import physprobe
from physprobe.errors import PublishError
from physprobe.util.paths import MARKER
from physprobe.util.redact import escaped
from physprobe.util.retries import TRANSIENT_STATUS, retried

RETRY_DELAYS = (2.0, 8.0, 30.0)  # seconds before each retry of a transient error


def check_repo_ids(org: str, names: list[str], option: str = "--only") -> None:
    """``PublishError`` naming the option at fault for a namespace or repo name the Hub refuses, before any work is
    done: ``--org``, or ``option`` (the one that gave ``names``); the value quoted with its escapes.

    >>> check_repo_ids("my org", ["prost"])
    Traceback (most recent call last):
    physprobe.errors.PublishError: --org 'my org': my org/prost is not a valid Hub repo id (Repo id must use alphanumeric chars, '-', '_' or '.'...)
    >>> check_repo_ids("me", ["my\x1b[2Jruns"], "--runs-repo")
    Traceback (most recent call last):
    physprobe.errors.PublishError: --runs-repo 'my\\x1b[2Jruns': me/my\\x1b[2Jruns is not a valid Hub repo id (Repo id must use alphanumeric chars, '-', '_' or '.'...)
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    def fault(repo_id: str) -> str | None:
        try:
            validate_repo_id(repo_id)
        except HFValidationError as error:
            return str(error).split(". ")[0]
        return None

    for name in names:
        reason = fault(f"{org}/{name}")
        if reason is not None:
            wrong, value = ("--org", org) if fault(f"{org}/physprobe") else (option, name)
            raise PublishError(f"{wrong} {value!r}: {escaped(org)}/{escaped(name)} is not a valid Hub repo id ({reason}...)")


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying: server errors, rate limits, timeouts, dropped connections."""
    import httpx2  # the HTTP client of huggingface_hub 2.x: its transport errors are the network failures
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return error.response.status_code in TRANSIENT_STATUS
    return isinstance(error, httpx2.TransportError)


def describe(error: BaseException, endpoint: str | None = None) -> str:
    """One line for a failed Hub call: the HTTP status or the network failure, never a traceback."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return f"HTTP {error.response.status_code} from the Hub ({str(error).splitlines()[0]})"
    if isinstance(error, httpx2.TransportError):
        return f"cannot reach the Hub at {endpoint or constants.ENDPOINT} ({type(error).__name__}: {error}); check the network or HF_ENDPOINT"
    return f"{type(error).__name__}: {error}"


def with_retries(call, what: str, log=print):
    """``call()``, retried after ``RETRY_DELAYS`` while it fails with a transient error (``physprobe.util.retries``)."""

    def note(attempt: int, delay: float, error: BaseException) -> None:
        log(f"retrying  {what} in {delay:g} s (attempt {attempt} failed: {describe(error)})")

    return retried(call, is_transient, RETRY_DELAYS, note)


def publish(repo, api, org: str, token: str, log=print) -> str:
    """Create ``repo`` (a ``RepoFolder``) if needed and make it hold exactly its folder's files; ``committed`` or
    ``unchanged``."""
    repo_id, kind = repo.repo_id(org), repo.hub_type
    extra = {"space_sdk": "gradio"} if kind == "space" else {}
    with_retries(lambda: api.create_repo(repo_id, repo_type=kind, exist_ok=True, token=token, **extra), repo_id, log)
    before = with_retries(lambda: api.repo_info(repo_id, repo_type=kind, token=token).sha, repo_id, log)
    info = with_retries(
        lambda: api.upload_folder(
            repo_id=repo_id, folder_path=repo.folder, repo_type=kind, token=token, delete_patterns="*",
            ignore_patterns=[MARKER],  # physprobe's local ownership marker is not part of the repo
            commit_message=f"physprobe {physprobe.__version__}: {repo.name} from {repo.source}",
        ),
        repo_id, log,
    )  # fmt: skip
    return "unchanged" if info.oid == before else "committed"


def tag_all(repos: list, api, org: str, token: str, tag: str, log=print) -> None:
    """Tag the head of every repository (those already tagged there are left); refuses a tag that names
    another commit, so a release never mixes versions."""
    heads, already = {}, set()
    for repo in repos:
        repo_id = repo.repo_id(org)
        heads[repo_id] = with_retries(lambda: api.repo_info(repo_id, repo_type=repo.hub_type, token=token).sha, repo_id, log)  # noqa: B023 - called at once, in this iteration
        refs = with_retries(lambda: api.list_repo_refs(repo_id, repo_type=repo.hub_type, token=token), repo_id, log)  # noqa: B023 - called at once
        existing = {ref.name: ref.target_commit for ref in refs.tags}
        if tag in existing and existing[tag] != heads[repo_id]:
            raise PublishError(
                f"tag {tag} of {repo_id} names commit {existing[tag][:12]}, not the published {heads[repo_id][:12]}; choose a new --tag"
            )
        if tag in existing:
            already.add(repo_id)
    for repo in repos:
        repo_id = repo.repo_id(org)
        if repo_id in already:
            log(f"tagged     {repo_id} (already {tag})")
            continue
        with_retries(
            lambda: api.create_tag(repo_id, tag=tag, revision=heads[repo_id], repo_type=repo.hub_type, token=token),  # noqa: B023 - called at once
            repo_id,
            log,
        )
        log(f"tagged     {repo_id} {tag}")


def push(repos: list, api, org: str, token: str, tag: str | None = None, log=print) -> dict[str, str]:
    """Publish every repo, reporting each as it is done, then tag them all (only if every one succeeded).

    Returns each repository's state (``committed``/``unchanged``/``failed: ...``); a failure does not stop
    the others, so a re-run has only the failed ones left to do.
    """
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    states = {}
    for repo in repos:
        repo_id = repo.repo_id(org)
        try:
            states[repo_id] = publish(repo, api, org, token, log)
        except (HfHubHTTPError, httpx2.HTTPError) as error:
            states[repo_id] = f"failed: {describe(error, api.endpoint)}"
        log(
            f"{states[repo_id].split(':')[0]:<10} {repo_id}"
            + (f": {states[repo_id][8:]}" if states[repo_id].startswith("failed") else "")
        )
    if tag and not any(state.startswith("failed") for state in states.values()):
        try:
            tag_all(repos, api, org, token, tag, log)
        except (HfHubHTTPError, httpx2.HTTPError) as error:
            states["tag"] = f"failed: {describe(error, api.endpoint)}"
    return states


def release_line(states: dict[str, str], tag: str | None) -> str:
    """The last line of a push: what state the release is in and what to do next."""
    failed = sorted(repo for repo, state in states.items() if state.startswith("failed"))
    published = len([repo for repo in states if repo != "tag" and repo not in failed])
    total = len([repo for repo in states if repo != "tag"])
    if failed:
        untagged = f"; tag {tag} not created" if tag else ""
        return (f"release INCOMPLETE: {published} of {total} repositories published{untagged}; failed: {', '.join(failed)}. "
                "Re-run the same command to finish")  # fmt: skip
    return f"release complete: {total} of {total} repositories published" + (f" and tagged {tag}" if tag else "")


def resolve_token() -> str:
    """The Hub token from ``HF_TOKEN`` or the huggingface_hub login; an error (without the token) if none."""
    from huggingface_hub import get_token

    token = os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` with a write token")
    return token


def check_write_access(api, token: str) -> None:
    """Fail clearly when the Hub cannot be reached, or the token is invalid or read-only (never shown)."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    try:
        identity = with_retries(lambda: api.whoami(token=token), "whoami")
    except HfHubHTTPError as error:
        if error.response is not None and error.response.status_code in (401, 403):
            raise PublishError(
                f"the Hugging Face token was rejected (HTTP {error.response.status_code}); use a valid write token"
            ) from None
        raise PublishError(f"cannot check the token: {describe(error, api.endpoint)}") from None
    except httpx2.HTTPError as error:
        raise PublishError(describe(error, api.endpoint)) from None
    role = identity.get("auth", {}).get("accessToken", {}).get("role")
    if role == "read":
        raise PublishError(f"the Hugging Face token of {identity.get('name', '?')} is read-only; a write token is needed")
