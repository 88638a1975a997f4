"""Chat templating, for any backend: a run's chat setting (``Chat``), the messages and plain text a prompt becomes,
and ``Templating``, a tokenizer's chat template applied under that setting.

``Settings.chat`` (``Chat``: ``mode`` ``"off"`` (the default) or ``"on"``, a named
``template``, a ``system_instruction``) reaches the backend when it is made; the backend alone applies
it, and only to the requests that read a prompt: ``Generate`` and ``GenerateEach`` (the prompts), ``Choice``
(the context) and ``YesNo`` (each prompt). ``chat_applied(request_type)`` says whether it does: with ``"on"``
(``--apply-chat-template``) always, an error if the model has no template; by default never, as the papers'
released scripts and lm-evaluation-harness read prompts (raw text). The prompt becomes the user message,
after a system message holding ``system_instruction`` if given; with no template applied, a system
instruction precedes the prompt, followed by a blank line. ``"on"`` with a request type that reads no prompt
is an error.

A backend with the model's tokenizer renders templates with ``Templating``; a server backend sends ``messages`` to
its chat endpoint (the server's template) or ``prompt_text`` to its completions endpoint.

>>> from physprobe.protocols.requests import Generate
>>> chat = Chat(system_instruction="Answer briefly.")
>>> chat.applies(Generate), Chat("on").applies(Generate)
(False, True)
>>> prompt_text("Which is bigger?", chat, templated=False)
'Answer briefly.\\n\\nWhich is bigger?'
>>> messages("Which is bigger?", chat)
[{'role': 'system', 'content': 'Answer briefly.'}, {'role': 'user', 'content': 'Which is bigger?'}]
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from physprobe.errors import BackendError
from physprobe.protocols.requests import Choice, Generate, GenerateEach, YesNo

CHAT_MODES = ("off", "on")
PROMPTED = (Generate, GenerateEach, Choice, YesNo)  # the request types a chat template applies to


@dataclass(frozen=True)
class Chat:
    """The chat setting of a run: ``--apply-chat-template [NAME]`` (``mode="on"``, ``template=NAME``; without it
    ``"off"``) and ``--system-instruction``."""

    mode: str = "off"
    template: str | None = None  # a named template of the tokenizer's (None: its default one)
    system_instruction: str | None = None

    def __post_init__(self):
        if self.mode not in CHAT_MODES:
            raise BackendError(f"chat mode {self.mode!r} is not one of {', '.join(CHAT_MODES)}")

    def applies(self, request_type: type) -> bool:
        """Whether ``request_type``'s prompts are read through the model's chat template.

        >>> Chat("on").applies(Choice), Chat("off").applies(Generate)
        (True, False)
        """
        return self.mode == "on" and request_type in PROMPTED

    def check(self, request_type: type) -> None:
        """A one-line error when the setting asks a chat template or an instruction of a request type that
        reads no prompt (masked LM, NLI, seq2seq targets, token sequences).

        >>> from physprobe.protocols.requests import Masked
        >>> Chat("on").check(Masked)
        Traceback (most recent call last):
        physprobe.errors.BackendError: --apply-chat-template and --system-instruction apply to prompts (generation, log-likelihood of a continuation, YES/NO); this protocol asks for candidate words at a mask and reads no prompt: leave them out
        """
        if request_type not in PROMPTED and (self.mode == "on" or self.system_instruction):
            raise BackendError(
                "--apply-chat-template and --system-instruction apply to prompts (generation, log-likelihood "
                f"of a continuation, YES/NO); this protocol asks for {request_type.asked_for} and reads no prompt: "
                "leave them out"
            )


def messages(prompt: str, chat: Chat, system: str | None = None) -> list[dict]:
    """The chat messages of a prompt: a system message (the request's ``system``, else ``chat``'s instruction)
    when there is one, then the prompt."""
    system = system or chat.system_instruction
    head = [{"role": "system", "content": system}] if system else []
    return head + [{"role": "user", "content": prompt}]


def prompt_text(prompt: str, chat: Chat, templated: bool, system: str | None = None) -> str:
    """A prompt as a backend without a chat template applied reads it: the system message (``messages``'),
    a blank line, then the prompt (``templated``: the template renders the message; the prompt is unchanged)."""
    system = system or chat.system_instruction
    if templated or not system:
        return prompt
    return f"{system}\n\n{prompt}"


def template_hash(template: str | None) -> str | None:
    """The sha256 of a chat template's text (None: no template).

    >>> len(template_hash("{{ messages }}")), template_hash("{{ messages }}") == template_hash("{{ message }}"), template_hash(None)
    (64, False, None)
    """
    return None if template is None else hashlib.sha256(template.encode()).hexdigest()


CHECK_PROMPT = "Which is heavier, a brick or a feather?"  # rendered once when a template is first applied


class Templating:
    """A tokenizer's chat template under a run's ``Chat`` setting: whether it applies to a request type
    (decided once per type), and the prompt as the model then reads it (``physprobe.backends.base`` says when
    it applies)."""

    def __init__(self, tokenizer, chat: Chat, model_name: str = "the model"):
        self.tokenizer, self.chat, self.model_name = tokenizer, chat, model_name
        self._applied: dict[type, bool] = {}

    @functools.cached_property
    def template(self) -> str | None:
        """The text of the template the run names (``Chat.template``: one of the tokenizer's named templates),
        else of the tokenizer's default one; None when it has none."""
        name, templates = self.chat.template, self.tokenizer.chat_template
        if name is not None:
            named = sorted(templates) if isinstance(templates, dict) else []
            if name not in named:
                known = f"its named templates: {', '.join(named)}" if named else "give --apply-chat-template without a name"
                raise BackendError(
                    f"--apply-chat-template {name}: {self.model_name} has no chat template named {name!r}; {known}"
                )
        try:
            return self.tokenizer.get_chat_template(name)
        except ValueError:  # no template (or several, none of them the default)
            return None

    def applied(self, request_type: type) -> bool:
        """Whether ``request_type``'s prompts go through the template; an error when the run asks a template
        the tokenizer lacks, or a template or instruction of a request type without a prompt."""
        if request_type not in self._applied:
            self.chat.check(request_type)
            applied = self.chat.applies(request_type)
            if applied and self.template is None:
                raise self._missing()
            self._applied[request_type] = applied
            if applied:  # a template that cannot render a prompt fails here, before any weight loads
                self.render(CHECK_PROMPT, request_type)
        return self._applied[request_type]

    def require(self) -> None:
        """With ``--apply-chat-template [NAME]``, that the tokenizer has the template: an error before any weight
        loads (for a GGUF file, from its metadata), whatever the requests."""
        if self.chat.mode == "on" and self.template is None:
            raise self._missing()

    def _missing(self) -> BackendError:
        return BackendError(f"--apply-chat-template: {self.model_name} has no default chat template (its tokenizer's "
                            "chat_template is empty); leave the option out")  # fmt: skip

    def render(self, prompt: str, request_type: type, system: str | None = None) -> str:
        """A prompt as the model reads it: through the template (generation prompt added) when it applies to
        ``request_type``, else with the system instruction and a blank line before it, if any. A template that
        fails (a syntax error, ``raise_exception``, a message it indexes that is not there) is one line naming it."""
        if not self.applied(request_type):
            return prompt_text(prompt, self.chat, templated=False, system=system)
        import jinja2

        try:
            return self.tokenizer.apply_chat_template(messages(prompt, self.chat, system), chat_template=self.chat.template,
                                                      add_generation_prompt=True, tokenize=False)  # fmt: skip
        except jinja2.TemplateError as error:
            raise BackendError(self._failed(error)) from None

    def _failed(self, error) -> str:
        import jinja2

        name = f"chat template {self.chat.template!r}" if self.chat.template else "default chat template"
        where = f"{self.model_name}'s {name} (sha256 {template_hash(self.template)[:12]})"
        reason = " ".join(str(error).split()) or type(error).__name__
        if isinstance(error, jinja2.TemplateSyntaxError):
            return f"{where} is not a valid Jinja template (line {error.lineno}: {reason}); fix it, or leave out --apply-chat-template"
        if self.chat.system_instruction and "system" in reason.lower():
            return f"{where} refuses the system message ({reason}): leave out --system-instruction, or give another template"
        return (f"{where} cannot render a prompt ({type(error).__name__}: {reason}); give another template "
                "(--apply-chat-template NAME), or leave out --apply-chat-template")  # fmt: skip
