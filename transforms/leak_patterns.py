"""Phrase tables of the leak checks (pure module).

Compiled patterns for wording that does not belong in a transformed text: a model thinking aloud
about its task (reasoning leak) and chat framing, refusals or the prompt's own instructions echoed
back (instruction leak). :mod:`transforms.error_checks` reports them; :mod:`transforms.cleaning`
uses the instruction patterns to tell an echoed instruction (reported) from a label (removed).
Each pattern carries an example of what it matches and, where it matters, what it must not.
"""

from __future__ import annotations

import re

__all__ = ["INSTRUCTION_ANYWHERE_RES", "INSTRUCTION_START_RES", "REASONING_START_RES", "THINK_TAG_RE"]

# An opening or closing think tag left in the answer.
THINK_TAG_RE = re.compile(r"</?think(?:ing)?\s*>", re.IGNORECASE)

_APOS = "['\u2019]"
# Optional Markdown or quote marks before the first word.
_LEAD = r"^[\s*#>_\"\u201c\u2018-]*"
# Nouns that stand for the text the model works on.
_TEXT_NOUN = (
    r"(?:sentence|text|input|original|passage|phrase|statement|paragraph|request|instruction|prompt|query|task"
    r"|meaning|wording|translation|paraphrase|summary|keywords?)s?"
)
_OBJECT = (
    rf"(?:(?:the|this|that|its|each|every|given|user{_APOS}s)\s+(?:[\w-]+\s+){{0,2}}?{_TEXT_NOUN}\b"
    r"|(?:it|this|that)\b(?=\s*(?:[.,:;!?]|$)|\s+(?:into|to|in|for|as|while|without|and|more|carefully|again)\b))"
)
# Verbs that only a model talking about its task uses on a text-like object.
_STUDY_VERB = (
    r"(?:understand|analy[sz]e|consider|examine|read|re-?read|look\s+at|review|check|identify|parse"
    r"|break\s+down|figure\s+out|think\s+about|focus\s+on|go\s+through|make\s+sure|start\s+with|begin\s+with)"
)
# Nouns that only name the product of a transformation (narrower than the task words of cleaning).
_PRODUCT_NOUN = (
    r"(?:paraphras\w*|rephras\w*|reword\w*|rewrit\w*|translat\w*|summar\w*|keywords?|expanded|version|rendition)"
)
# Verbs naming the transformations; the first group is used for nothing but that.
_TASK_VERB_BARE = r"(?:paraphras|rephras|reword|back-?translat)\w*"
_TASK_VERB_OBJ = r"(?:rewrite|translate|summari[sz]e|expand(?:\s+on)?|condense|shorten|restyle)"
_META_ACTION = rf"(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ}\s+{_OBJECT}|{_STUDY_VERB}\s+{_OBJECT}|come\s+up\s+with\s+an?\b)"
_FIRST_PERSON_PLAN = (
    rf"i(?:\s+need\s+to|\s+have\s+to|\s+should|\s+must|{_APOS}ll(?:\s+need\s+to)?|\s+will(?:\s+need\s+to)?"
    rf"|{_APOS}m\s+going\s+to|\s+am\s+going\s+to|\s+want\s+to|{_APOS}d\s+like\s+to|\s+would\s+like\s+to)"
)

_REASONING_START = [
    # "Let me think", "Let me see,", "Let me paraphrase", "Let me analyse the sentence" (not "Let me know").
    rf"let\s+me\s+(?:first\s+|now\s+|just\s+)?(?:think\b|see(?:\s*[,.\u2026]|\s+(?:if|whether|how)\b)|{_META_ACTION})",
    # "Let's break this down", "Let's analyse the text" (not "Let's go to the beach").
    rf"let{_APOS}s\s+(?:first\s+|now\s+)?(?:think\b|break\s+(?:it|this|that)\s+down|see\s+(?:if|whether|how)\b"
    rf"|{_META_ACTION})",
    # "Okay, so", "Alright, let me", "Okay, the user wants", "Hmm, ..."
    rf"(?:okay|ok|alright|all\s+right)[,.!]?\s+(?:so\b|let\s+me\b|let{_APOS}s\b|i\s+need\b|i{_APOS}ll\b|i\s+will\b"
    r"|i\s+should\b|i\s+have\s+to\b|the\s+user\b|first\b)",
    r"hmm+\b",
    # "First, I need to understand the sentence", "First, let me", "First I'll paraphrase".
    rf"first(?:ly)?,?\s+(?:let\s+me|let{_APOS}s|{_FIRST_PERSON_PLAN}|i)\s+(?:first\s+)?(?:think\b|{_META_ACTION})",
    # "Step 1: identify the main clause" (not "Step 1: preheat the oven").
    r"step\s*(?:1|one)\s*[:.)\u2013-]\s*(?:\w+\s+){0,2}?(?:identify|understand|analy[sz]e|read|break|determine|parse"
    r"|look|consider|examine|translat|paraphras|rephras|rewrit|summari[sz]|expand|extract|figure)",
    # "I need to paraphrase", "I'll translate the sentence", "I'm going to rewrite it".
    rf"{_FIRST_PERSON_PLAN}\s+(?:now\s+|first\s+)?{_META_ACTION}",
    # "To paraphrase this sentence", "To translate the given text" (not "To summarize, ...").
    rf"to\s+(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})\s+(?:this|the\s+(?:given|following|original|provided|above)|"
    rf"the\s+{_TEXT_NOUN}\b)",
    # "The user wants me to", "The user is asking for a paraphrase", "The user's request".
    rf"the\s+user(?:\s+(?:wants|asked|asks|is\s+asking|has\s+asked|would\s+like|needs|requests|has\s+requested)\s+"
    rf"(?:me\b|(?:for\s+)?(?:a|an|the)\s+(?:\w+\s+)?{_PRODUCT_NOUN}|to\s+(?:have|get)\b|(?:me\s+)?to\s+"
    rf"(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ}))|\s+(?:has\s+)?provided\b|{_APOS}s\s+(?:request|instruction|query"
    rf"|input|sentence|text|message)\b)",
    # A reasoning section title.
    r"(?:thinking|reasoning|thought\s+process|chain\s+of\s+thought)\s*:",
]
REASONING_START_RES = tuple(re.compile(_LEAD + pattern, re.IGNORECASE) for pattern in _REASONING_START)

# Words after "Sure!"/"Certainly," that show the reply is addressed to the requester.
_ASSISTANT_REPLY = (
    rf"(?:here\b|i{_APOS}d\s+be\s+(?:happy|glad)|i\s+would\s+be\s+(?:happy|glad)|happy\s+to\b|glad\s+to\b"
    rf"|i\s+can\s+(?:help|do\s+that)|i{_APOS}ll\s+(?:help|do\s+that|{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})|below\b"
    rf"|let\s+me\b|no\s+problem\b|(?:this\s+is\s+)?(?:the|an?|my)\s+(?:[\w-]+\s+){{0,2}}?{_PRODUCT_NOUN}\b)"
)
_REFUSAL_OBJECT = (
    rf"(?:assist|comply|fulfil+|help\s+(?:you\s+)?with\s+(?:this|that|the|your)|{_TASK_VERB_BARE}"
    rf"|{_TASK_VERB_OBJ}\s+{_OBJECT}"
    rf"|(?:provide|generate|write|create)\s+(?:a|an|the|that|this)\s+(?:\w+\s+)?{_PRODUCT_NOUN}"
    rf"|process\s+(?:this|that|the|your)\s+request|complete\s+(?:this|that|the|your)\s+(?:task|request))"
)
_INSTRUCTION_START = [
    # "Sure! Here's...", "Certainly, I'd be happy to", "Of course. The paraphrase is" (not "Sure enough").
    rf"(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely|no\s+problem|great)\s*[!,.:]\s*(?:{_ASSISTANT_REPLY}|$)",
    r"(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely)\s*[!.]?\s*(?:\n|$)",
    # "Here is the paraphrase.", "Here's a more formal version" (not "Here is where we met.").
    rf"here\s*(?:is|are|{_APOS}s)\b[^.!?\n:]{{0,60}}?\b(?:{_PRODUCT_NOUN}|sentence|text|passage|attempt)\b",
    r"here\s+(?:you\s+go|it\s+is)\b",
    # Self-reference of an assistant.
    r"as\s+an?\s+(?:ai|language\s+model|large\s+language\s+model|assistant)\b",
    # Refusals: "I'm sorry, but I can't", "I cannot paraphrase this" (not "I'm sorry for your loss").
    rf"(?:i{_APOS}m|i\s+am)\s+(?:very\s+|so\s+)?sorry\b[^.!?\n]{{0,40}}?\b(?:can{_APOS}t|cannot|can\s+not|unable"
    r"|not\s+able|won['\u2019]t|as\s+an?\s+ai|language\s+model)",
    rf"(?:i|i{_APOS}m|i\s+am)\s+(?:cannot|can{_APOS}t|can\s+not|unable\s+to|not\s+able\s+to|won{_APOS}t)\s+"
    rf"{_REFUSAL_OBJECT}",
    # The prompt's input framing echoed back: "Original: ...", "Input text: ...".
    r"(?:original|source|input)(?:\s+(?:text|sentence|passage))?\s*:",
]
INSTRUCTION_START_RES = tuple(re.compile(_LEAD + pattern, re.IGNORECASE) for pattern in _INSTRUCTION_START)
# Instruction wording repeated anywhere in the answer.
_INSTRUCTION_ANYWHERE = [
    # An imperative at the start of a sentence: "Translate the following", "Rewrite the text in ...".
    rf"(?:^|[.!?:\n]\s*)(?:please\s+)?(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})\s+(?:the|this)\s+"
    r"(?:following|given|above|text|sentence|passage|input|paragraph)\b",
    # The same wording anywhere when it points at the prompt: "translate the following", "the text below".
    rf"\b(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})\s+the\s+following\b",
    r"\bthe\s+(?:text|sentence|passage)\s+below\b",
    r"\b(?:reply|respond|answer)\s+with\s+(?:[\w-]+\s+){0,3}?only\b",
    r"\b(?:output|return|write)\s+only\s+the\b",
    r"\bdo\s+not\s+(?:add|include)\s+(?:any\s+)?(?:explanations?|comments?|notes?|labels?)\b",
    r"\b(?:extract|list)\s+(?:the\s+)?(?:\d+\s+|most\s+important\s+)?keywords\b",
]
INSTRUCTION_ANYWHERE_RES = tuple(re.compile(pattern, re.IGNORECASE) for pattern in _INSTRUCTION_ANYWHERE)
