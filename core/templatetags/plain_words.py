"""Code names in words on pages (issues 31 and 42): every filter here reads the one vocabulary,
``core.vocabulary``. ``{{ key|plain_key }}`` turns a data key such as ``n_examples`` into
"examples"; ``plain_verb`` an audit verb, ``plain_param`` a parameter or a code-name value of one,
``plain_metric`` a metric key, ``plain_axis`` an axis, ``plain_task`` a task type, ``plain_side`` a
perturbed side, ``plain_rater`` a baseline rater (``llm:<alias>``), ``plain_alias`` a backend
alias, ``plain_rule`` a flag rule or a rejection reason. Transformation names and agreement groups
are titled by ``transforms_text``, which knows the registry."""

from django import template

from core import vocabulary

register = template.Library()

register.filter("plain_key", vocabulary.plain_key)
register.filter("plain_verb", vocabulary.plain_verb)
register.filter("plain_param", vocabulary.plain_param)
register.filter("plain_metric", vocabulary.plain_metric)
register.filter("plain_axis", vocabulary.plain_axis)
register.filter("plain_task", vocabulary.plain_task_type)
register.filter("plain_side", vocabulary.plain_side)
register.filter("plain_rater", vocabulary.plain_rater)
register.filter("plain_alias", vocabulary.alias_words)
register.filter("plain_rule", vocabulary.plain_rule)
