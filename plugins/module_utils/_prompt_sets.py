# This module_utils file is private to the llmops.vllm collection; it may change without notice.
# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Seeded prompt sets that pull speculative decoding in opposite directions.

Prompt-lookup (n-gram) drafting only helps when the answer repeats the prompt, and random
token prompts hide that entirely. ``novel_reasoning`` asks for new reasoning over fresh
numbers (little to copy: where n-gram drafting loses); ``code_editing`` and ``summarization``
hand the model text that the answer must largely repeat (where it wins). Everything is
generated from small built-in word lists, so the same seed gives the same prompts anywhere,
and each prompt stays under about 1,200 characters to fit small test models' context.
"""

from __future__ import annotations

import json
import random

_PEOPLE = (
    "Amara", "Bogdan", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiroshi", "Ines", "Jonas",
    "Kalani", "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamsin",
    "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zofia",
)
_PLACES = (
    "Aberdeen", "Bergen", "Cordoba", "Dundee", "Eindhoven", "Fresno", "Gdansk", "Hobart", "Izmir",
    "Jaipur", "Kraków", "Leeds", "Malmö", "Nantes", "Osaka", "Porto", "Quito", "Rennes", "Split",
    "Tartu", "Utrecht", "Valencia", "Windhoek", "Yerevan", "Zagreb",
)
_GOODS = (
    "crates of apples", "spools of copper wire", "bags of cement", "boxes of tiles", "rolls of fabric",
    "barrels of olive oil", "pallets of bricks", "sacks of rice", "cases of glass jars", "drums of paint",
)
_TASKS = (
    "resurfacing a car park", "painting a school", "cataloguing an archive", "rewiring a theatre",
    "tiling a station concourse", "clearing a forest trail", "insulating a warehouse roof",
)
_OBJECTS = ("marbles", "tokens", "tickets", "beads", "cards", "dice")
_COLOURS = ("red", "green", "blue", "amber", "violet", "white", "black", "orange")
_ASK_REASONING = (
    "Reason through it step by step, explaining why each step follows, then state the answer.",
    "Work it out carefully in your own words, checking each intermediate quantity, and give the final answer.",
    "Explain your reasoning in full sentences before committing to a final answer.",
    "Think aloud: set up the quantities, solve, and then verify the result a second way.",
)
_OPENERS = (
    "Here is a puzzle from a planning meeting.",
    "A colleague sent this problem and wants a clear explanation.",
    "Consider the following situation carefully.",
    "This question came up while drafting a budget.",
    "Try this exercise from a logistics course.",
)

_NOUNS = (
    "order", "invoice", "shipment", "sensor", "booking", "ticket", "account", "reading", "route",
    "parcel", "batch", "session", "member", "device", "payment", "entry", "sample", "job",
)
_ADJECTIVES = ("pending", "active", "archived", "priority", "draft", "open", "late", "cached", "daily")
_FIELDS = (
    ("quantity", "int", "0"), ("price", "float", "0.0"), ("weight", "float", "0.0"),
    ("owner", "str", '""'), ("region", "str", '"north"'), ("attempts", "int", "0"),
    ("score", "float", "1.0"), ("label", "str", '""'), ("retries", "int", "3"), ("capacity", "int", "10"),
)
_EDITS = (
    "Rename the class {cls} to {new_cls} everywhere it appears and return the complete updated file.",
    "Add a one-line docstring to every function and method; change nothing else and return the whole file.",
    "Rename the field {field} to {new_field} throughout, including the method that uses it, and return the full file.",
    "Add type hints to every function signature without changing behaviour, and return the complete file.",
    "Replace the loop in {function} with an equivalent comprehension and return the entire file unchanged otherwise.",
)

_TEAMS = ("support", "warehouse", "billing", "field service", "network", "procurement", "maintenance", "dispatch")
_MEASURES = (
    "%d tickets closed", "%d deliveries", "an average response time of %d minutes", "%d hours of overtime",
    "%d returns", "%d kWh of energy use", "%d open incidents",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_CAUSES = (
    "a delayed supplier shipment", "a failed cooling unit", "two staff on leave", "a software rollout",
    "heavy rain on the ring road", "a billing system outage", "a new training programme",
)
_ASK_SUMMARY = (
    "Summarise the report above in {count} bullet points, quoting every name and figure exactly as written.",
    "Write a short summary of the report above for a manager, repeating the key figures word for word.",
    "List the {count} most important facts from the report above, copying names, days and numbers exactly.",
)


def _distinct(rng, pool, count):
    return rng.sample(pool, count)


def _work_rate_problem(rng):
    lead_a, lead_b, lead_c = _distinct(rng, _PEOPLE, 3)
    days_a, days_b, days_c = rng.randint(6, 15), rng.randint(8, 20), rng.randint(10, 30)
    joins = rng.randint(2, 5)
    return (
        "Three crews, led by %s, %s and %s, are %s in %s. Working alone, %s's crew would need %d days, "
        "%s's crew %d days and %s's crew %d days. %s's and %s's crews start together; %s's crew joins "
        "after %d days. How many days does the whole job take, and what share of it did each crew do?"
        % (lead_a, lead_b, lead_c, rng.choice(_TASKS), rng.choice(_PLACES), lead_a, days_a, lead_b, days_b,
           lead_c, days_c, lead_a, lead_b, lead_c, joins)
    )


def _inventory_problem(rng):
    place = rng.choice(_PLACES)
    goods = rng.choice(_GOODS)
    start = rng.randint(200, 900)
    days = sorted(_distinct(rng, _DAYS, 4), key=_DAYS.index)
    moves = []
    for day in days:
        if rng.random() < 0.5:
            moves.append("on %s %d arrive" % (day, rng.randint(20, 250)))
        else:
            moves.append("on %s %d%% of the stock is shipped out, rounded down" % (day, rng.randint(5, 40)))
    return (
        "A depot in %s starts the week with %d %s. Then, in this order, %s. "
        "Each evening %d are set aside for quality checks and never come back. "
        "How many are left at the end of %s, and on which day did the stock fall the most?"
        % (place, start, goods, "; ".join(moves), rng.randint(3, 15), days[-1])
    )


def _probability_problem(rng):
    colours = _distinct(rng, _COLOURS, 3)
    counts = [rng.randint(2, 12) for dummy in colours]
    thing = rng.choice(_OBJECTS)
    draws = rng.randint(2, 3)
    return (
        "A box holds %d %s %s, %d %s %s and %d %s %s. %s draws %d of them without looking and without "
        "putting any back. What is the probability that at least two share a colour, and what is the "
        "probability that none of them is %s? Give exact fractions and decimals."
        % (counts[0], colours[0], thing, counts[1], colours[1], thing, counts[2], colours[2], thing,
           rng.choice(_PEOPLE), draws, colours[2])
    )


def _ordering_problem(rng):
    runners = _distinct(rng, _PEOPLE, 5)
    order = list(runners)
    rng.shuffle(order)
    clues = [
        "%s finished somewhere ahead of %s" % (order[0], order[3]),
        "%s was not last" % order[3],
        "exactly one runner finished between %s and %s" % (order[1], order[3]),
        "%s finished immediately after %s" % (order[2], order[1]),
        "%s was neither first nor third" % order[4],
    ]
    rng.shuffle(clues)
    return (
        "Five runners, %s, took part in a race in %s with no ties. We know that %s. "
        "Find every finishing order consistent with these facts, and say who could have come %s."
        % (", ".join(runners), rng.choice(_PLACES), "; ".join(clues), rng.choice(("second", "fourth")))
    )


def _novel_reasoning(rng):
    problem = rng.choice((_work_rate_problem, _inventory_problem, _probability_problem, _ordering_problem))
    return "%s %s %s" % (rng.choice(_OPENERS), problem(rng), rng.choice(_ASK_REASONING))


def _code_editing(rng):
    noun = rng.choice(_NOUNS)
    cls = "%s%s" % (rng.choice(_ADJECTIVES).capitalize(), noun.capitalize())
    numeric_field = rng.choice([field for field in _FIELDS if field[1] != "str"])
    text_field = rng.choice([field for field in _FIELDS if field[1] == "str"])
    fields = [numeric_field, text_field] + _distinct(
        rng, [field for field in _FIELDS if field not in (numeric_field, text_field)], 2
    )
    rng.shuffle(fields)
    total_field = numeric_field[0]
    function = "summarise_%ss" % noun
    lines = [
        "from dataclasses import dataclass",
        "",
        "",
        "@dataclass",
        "class %s:" % cls,
        "    %s_id: int" % noun,
    ]
    lines += ["    %s: %s = %s" % field for field in fields]
    lines += [
        "",
        "    def is_heavy(self, limit):",
        "        return self.%s > limit" % total_field,
        "",
        "",
        "def %s(items, limit=%d):" % (function, rng.randint(5, 500)),
        "    total = 0",
        "    names = []",
        "    for item in items:",
        "        if item.is_heavy(limit):",
        "            total += item.%s" % total_field,
        "            names.append(item.%s)" % text_field[0],
        "    return total, sorted(names)",
    ]
    edit = rng.choice(_EDITS).format(
        cls=cls,
        new_cls="%s%s" % (rng.choice(_ADJECTIVES).capitalize(), rng.choice(_NOUNS).capitalize()),
        field=total_field,
        new_field="%s_%s" % (total_field, rng.choice(("value", "amount", "count"))),
        function=function,
    )
    return "%s\n\n```python\n%s\n```" % (edit, "\n".join(lines))


def _summarization(rng):
    place = rng.choice(_PLACES)
    manager = rng.choice(_PEOPLE)
    sentences = ["Weekly operations report for the %s site, prepared by %s." % (place, manager)]
    for day in sorted(_distinct(rng, _DAYS, 3), key=_DAYS.index):
        sentences.append(
            "On %s the %s team recorded %s, %s %d%% on the previous week, mainly because of %s."
            % (day, rng.choice(_TEAMS), rng.choice(_MEASURES) % rng.randint(12, 480), rng.choice(("up", "down")),
               rng.randint(2, 45), rng.choice(_CAUSES))
        )
    sentences.append(
        "%s asked %s to review the %s rota before %s; the budget stays at %d euros."
        % (manager, rng.choice(_PEOPLE), rng.choice(_TEAMS), rng.choice(_DAYS), rng.randint(2, 90) * 1000)
    )
    ask = rng.choice(_ASK_SUMMARY).format(count=rng.randint(3, 5))
    return "%s\n\n%s" % (" ".join(sentences), ask)


GENERATORS = {
    "novel_reasoning": _novel_reasoning,
    "code_editing": _code_editing,
    "summarization": _summarization,
}


def _read_jsonl(path):
    prompts = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError("%s line %d is not JSON: %s" % (path, number, exc))
            if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
                raise ValueError('%s line %d must be an object with a string "prompt"' % (path, number))
            prompts.append(record["prompt"])
    if not prompts:
        raise ValueError("%s holds no prompts" % path)
    return prompts


def load_prompts(prompt_set, count, seed):
    """``count`` prompts from a built-in set (seeded) or a JSONL file of ``{"prompt": ...}`` lines.

    Built-in prompts come from one seeded stream, so the first prompts are the same whatever
    ``count`` is. A file's prompts are used in order and repeated when it holds fewer than ``count``.
    """
    generator = GENERATORS.get(prompt_set)
    if generator is None:
        prompts = _read_jsonl(prompt_set)
        return [prompts[index % len(prompts)] for index in range(count)]
    rng = random.Random("%s:%d" % (prompt_set, seed))
    return [generator(rng) for dummy in range(count)]
