"""What ``physprobe publish --push`` would do, said by the dry run: each target repository's id and type, the files
``upload_folder`` would send (huggingface_hub's own filter, with physprobe's marker left out, as the push leaves it out)
with their sizes, and the refusals ``--push`` would make.

>>> import tempfile; folder = Path(tempfile.mkdtemp()); _ = (folder / "README.md").write_text("# card")
>>> _ = (folder / MARKER).write_text("{}")
>>> print("\\n".join(plan([RepoFolder("prost", "dataset", folder, "physprobe build")], "my-name")))
dataset  my-name/prost: 1 file, 6 B
    README.md  6 B
"""

from __future__ import annotations

from pathlib import Path

from physprobe.publish.folders import RepoFolder
from physprobe.util.paths import MARKER
from physprobe.util.sizes import human_size


def files(repo: RepoFolder) -> list[Path]:
    """The files of ``repo``'s folder the push uploads, in the order it sends them."""
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    found = {p.relative_to(repo.folder).as_posix(): p for p in sorted(repo.folder.glob("**/*")) if p.is_file()}
    kept = filter_repo_objects(found, ignore_patterns=[MARKER, *DEFAULT_IGNORE_PATTERNS])
    return [found[name] for name in kept]


def plan(repos: list[RepoFolder], org: str) -> list[str]:
    """Per repository: its Hub type and id, its file count and size, then each file with its size."""
    lines = []
    for repo in repos:
        sent = files(repo)
        total = sum(path.stat().st_size for path in sent)
        lines.append(f"{repo.hub_type:<8} {repo.repo_id(org)}: {len(sent)} file{'s' * (len(sent) != 1)}, {human_size(total)}")
        width = max((len(path.relative_to(repo.folder).as_posix()) for path in sent), default=0)
        lines += [f"    {path.relative_to(repo.folder).as_posix():<{width}}  {human_size(path.stat().st_size)}" for path in sent]
    return lines
