"""A Label Studio labeling config (XML) as LabelGate questions: one question per supported control.

===================  ==========================  ===================================================================
control              level / kind                categories (labels), in the labeling config's order
===================  ==========================  ===================================================================
``Choices``          nominal (ordinal if asked)  the ``<Choice>`` values (``alias`` when set: the result stores it)
``Choices multiple`` set (``choice="multiple"``)  the ``<Choice>`` values: a judgement is the set chosen
``Rating``           ordinal                     ``1 .. maxRating`` (default 5), integers
``Number``           interval                    none (numbers)
``Taxonomy``         set (nominal with           every node's path joined by `` / ``, in document order
                     ``maxUsages="1"``)
``Labels``           kind spans                  the ``<Label>`` values: each region is a span of the text
``RectangleLabels``  kind boxes                  the ``<Label>`` values: each region is a box (percent coordinates)
===================  ==========================  ===================================================================

A multi-choice ``Choices`` and a multi-select ``Taxonomy`` (Label Studio's default; ``maxUsages="1"`` makes it
single-select) hold sets: their questions are ``level: set`` (Jaccard distance unless the question says
``distance: masi``). ``Labels`` and ``RectangleLabels`` hold regions: their questions are ``kind: spans`` (offsets
``value.start`` / ``value.end``; the text's length from the task data the control's ``toName`` shows) and
``kind: boxes``. The gate's question for the control may ask for another level the control supports
(:data:`ALLOWED_LEVELS`: a ``Choices`` may be gated as ordinal, a ``Rating`` as interval); its categories, when the
gate's configuration lists them, must be the labeling config's (:func:`question_categories`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labelgate.errors import InputError, Reason

#: Where the result's value sits, per control type.
VALUE_KEYS = {"Choices": "choices", "Rating": "rating", "Number": "number", "Taxonomy": "taxonomy",
              "Labels": "labels", "RectangleLabels": "rectanglelabels"}
#: The level of each control type's question (a multi-select Choices / Taxonomy: ``set``, :func:`parse_control`).
LEVELS = {"Choices": "nominal", "Rating": "ordinal", "Number": "interval", "Taxonomy": "nominal", "Labels": "nominal",
          "RectangleLabels": "nominal"}
#: The levels a gate may give each control type's question (the first is the default); a set control's is ``set``.
ALLOWED_LEVELS = {"Choices": ("nominal", "ordinal"), "Rating": ("ordinal", "interval", "nominal"),
                  "Number": ("interval", "ratio"), "Taxonomy": ("nominal",), "Labels": ("nominal",),
                  "RectangleLabels": ("nominal",)}
#: The question kind of a region control (every other control's is ``labels``).
KINDS = {"Labels": "spans", "RectangleLabels": "boxes"}


@dataclass(frozen=True)
class Control:
    """One control of a labeling config, as a LabelGate question.

    Attributes
    ----------
    name : str
        The control's ``name`` (``from_name`` in the results).
    type : str
        ``Choices``, ``Rating``, ``Number`` or ``Taxonomy``.
    level : str
        ``nominal``, ``ordinal`` or ``interval``.
    categories : list or None
        The labels in the config's order (None for ``Number``).
    data_key : str or None
        A ``Labels`` control: the task data key of the text it marks (``$text`` → ``text``).
    """

    name: str
    type: str
    level: str
    categories: list[Any] | None = None
    data_key: str | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        """``spans`` (``Labels``), ``boxes`` (``RectangleLabels``) or ``labels``."""
        return KINDS.get(self.type, "labels")

    def question(self) -> dict[str, Any]:
        """The gate configuration's question for this control (``name``, ``level``, ``categories``).

        Examples
        --------
        >>> Control("stars", "Rating", "ordinal", [1, 2, 3]).question()
        {'name': 'stars', 'level': 'ordinal', 'categories': [1, 2, 3]}
        """
        out: dict[str, Any] = {"name": self.name, "level": self.level}
        if self.kind != "labels":
            out = {"name": self.name, "kind": self.kind}
        elif self.level == "set":
            out["distance"] = "jaccard"
        if self.categories is not None:
            out["categories"] = list(self.categories)
        return out


def parse_root(label_config: str, project: str = "the project") -> ET.Element:
    """The parsed XML of a labeling config.

    Raises
    ------
    InputError
        The text is not XML.
    """
    try:
        # expat (Python >= 3.11 bundles 2.4.1+) refuses entity expansion bombs; external entities are not fetched.
        return ET.fromstring(label_config)
    except ET.ParseError as exc:
        raise InputError(f"The labeling config of {project} is not valid XML ({exc}).", Reason.UNREADABLE_INPUT,
                         project=project) from None


def control_names(label_config: str, project: str = "the project") -> frozenset[str]:
    """The ``name`` of every tag of the config (any control: the ``from_name`` values a result may carry)."""
    return frozenset(str(node.get("name")) for node in parse_root(label_config, project).iter() if node.get("name"))


def controls(label_config: str, project: str = "the project") -> list[Control]:
    """Every ``Choices`` / ``Rating`` / ``Number`` / ``Taxonomy`` / ``Labels`` / ``RectangleLabels`` control of the
    config, in order.

    Examples
    --------
    >>> xml = '''<View><Choices name="s" toName="t"><Choice value="a"/></Choices>
    ...   <Choices name="tags" toName="t" choice="multiple"><Choice value="x"/></Choices><Number name="n" toName="t"/>
    ...   </View>'''
    >>> [c.question() for c in controls(xml)]  # doctest: +NORMALIZE_WHITESPACE
    [{'name': 's', 'level': 'nominal', 'categories': ['a']},
     {'name': 'tags', 'level': 'set', 'distance': 'jaccard', 'categories': ['x']}, {'name': 'n', 'level': 'interval'}]
    """
    root = parse_root(label_config, project)
    names = [str(n.get("name")) for n in root.iter() if n.tag in VALUE_KEYS and n.get("name")]
    return [parse_control(label_config, name, project) for name in dict.fromkeys(names)]


def parse_control(label_config: str, control: str, project: str = "the project") -> Control:
    """The question of the control named ``control`` in a labeling config (XML).

    Raises
    ------
    InputError
        The XML cannot be parsed, or no supported control has that name (the message lists those it has).

    Examples
    --------
    >>> xml = '''<View><Text name="t" value="$text"/>
    ...   <Choices name="sentiment" toName="t"><Choice value="neg"/><Choice value="pos" alias="P"/></Choices>
    ...   <Rating name="stars" toName="t" maxRating="4"/></View>'''
    >>> parse_control(xml, "sentiment")
    Control(name='sentiment', type='Choices', level='nominal', categories=['neg', 'P'])
    >>> parse_control(xml, "stars").categories
    [1, 2, 3, 4]
    """
    root = parse_root(label_config, project)
    found = {node.get("name"): node for node in root.iter() if node.tag in VALUE_KEYS and node.get("name")}
    node = found.get(control)
    if node is None:
        raise InputError(f"The labeling config of {project} has no Choices / Rating / Number / Taxonomy / Labels / "
                         f"RectangleLabels control named {control!r} (it has {sorted(map(str, found))}).",
                         Reason.MISSING_COLUMN, project=project, control=control)
    kind = node.tag
    level = LEVELS[kind]
    if (kind == "Choices" and node.get("choice", "single") == "multiple") or \
            (kind == "Taxonomy" and node.get("maxUsages", "") != "1"):
        level = "set"  # a multi-select control: each judgement is the set of what was chosen
    categories: list[Any] | None
    if kind in KINDS:
        categories = [c.get("alias") or c.get("value") for c in node.iter("Label")]
        return Control(control, kind, level, categories, _data_key(root, node, control, project))
    if kind == "Choices":
        categories = [c.get("alias") or c.get("value") for c in node.iter("Choice")]
    elif kind == "Rating":
        try:
            top = int(node.get("maxRating", "5"))
        except ValueError:
            raise InputError(f"Control {control!r} of {project} has a non-integer maxRating "
                             f"{node.get('maxRating')!r}.", Reason.UNREADABLE_INPUT, project=project,
                             control=control) from None
        categories = list(range(1, top + 1))
    elif kind == "Taxonomy":
        categories = [" / ".join(path) for path in _taxonomy_paths(node, ())]
    else:
        categories = None
    return Control(control, kind, level, categories)


def _data_key(root: ET.Element, node: ET.Element, control: str, project: str) -> str | None:
    """The task data key of the object a region control marks (``<Text name="text" value="$text"/>``: ``text``),
    for spans the text whose length the units cover; None for a box control (its coordinates are percents)."""
    if node.tag != "Labels":
        return None
    target = node.get("toName")
    shown = next((n for n in root.iter() if n.get("name") == target and n is not node), None)
    value = str(shown.get("value") or "") if shown is not None else ""
    if not value.startswith("$"):
        raise InputError(f"Control {control!r} of {project} marks {target!r}, which shows no task data ('$key' in "
                         "its value): the text's length is unknown.", Reason.UNREADABLE_INPUT, project=project,
                         control=control)
    return value[1:]


def _taxonomy_paths(node: ET.Element, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for child in node:
        if child.tag == "Choice":
            path = (*prefix, str(child.get("alias") or child.get("value")))
            yield path
            yield from _taxonomy_paths(child, path)


def question_categories(spec: Control, level: str, categories: Sequence[Any] | None, question: str,
                        project: str = "the project", *, stated: bool = True) -> tuple[Any, ...] | None:
    """The categories a gate's question over ``spec`` uses: the labeling config's, checked against the question's.

    Parameters
    ----------
    spec : Control
        The control the question reads.
    level : str
        The question's level; it must be one the control supports (:data:`ALLOWED_LEVELS`).
    categories : sequence or None
        The question's categories in the gate's configuration (None: take the labeling config's).
    question : str
        The question's name (for the messages).
    project : str
    stated : bool, default True
        Whether the configuration states the question's level. A question that does not (its level is the default,
        nominal) over a control whose level is not nominal (a ``Rating``, a ``Number``) is refused: gating a rating
        scale as unordered categories would be a silent change of the question.

    Returns
    -------
    tuple or None
        The categories in the labeling config's order (None for a ``Number``, and for an interval question that
        lists none).

    Raises
    ------
    InputError
        The level is not one the control supports, or is not stated for a control that is not nominal, or the listed
        categories are not the labeling config's (an ordinal question's order must be the config's too).

    Examples
    --------
    >>> spec = Control("stars", "Rating", "ordinal", [1, 2, 3])
    >>> question_categories(spec, "ordinal", None, "stars")
    (1, 2, 3)
    >>> question_categories(spec, "ordinal", [3, 2, 1], "stars")
    Traceback (most recent call last):
    ...
    labelgate.errors.InputError: Question 'stars' lists the categories [3, 2, 1], but control 'stars' of the project \
has [1, 2, 3] in its labeling config (the order of an ordinal question is the config's).
    """
    allowed = ("set",) if spec.level == "set" else ALLOWED_LEVELS[spec.type]
    if not stated and level != spec.level:
        raise InputError(f"Question {question!r} states no level, but control {spec.name!r} of {project} is a "
                         f"{spec.type}, {spec.level} in its labeling config: set the question's level "
                         f"({' or '.join(allowed)}).", Reason.MISSING_SETTING, project=project, control=spec.name,
                         question=question)
    if level not in allowed:
        raise InputError(f"Question {question!r} is {level}, but control {spec.name!r} of {project} is a {spec.type} "
                         f"(a question over it is {' or '.join(allowed)}).", Reason.INVALID_PARAMETER,
                         project=project, control=spec.name, question=question)
    if spec.categories is None or (categories is None and level in ("interval", "ratio")):
        return None
    ours = tuple(spec.categories)
    if categories is None:
        return ours
    given = [str(c) for c in categories]
    same = given == [str(c) for c in ours] if level == "ordinal" else sorted(given) == sorted(map(str, ours))
    if not same:
        raise InputError(f"Question {question!r} lists the categories {list(categories)}, but control "
                         f"{spec.name!r} of {project} has {list(ours)} in its labeling config (the order of an "
                         "ordinal question is the config's).", Reason.UNKNOWN_CATEGORY, project=project,
                         control=spec.name, question=question)
    return ours


def config_text(label_config: str | Path) -> str:
    """The XML of a labeling config given as text or as the path of an ``.xml`` file.

    Raises
    ------
    InputError
        The file cannot be read.
    """
    text = str(label_config)
    if text.lstrip().startswith("<"):
        return text
    try:
        return Path(text).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"Cannot read the labeling config file {text!r} ({exc.strerror}).",
                         Reason.UNREADABLE_INPUT, file=text) from None
