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

``tool_calls`` is a chat set: a system prompt, a request that needs tools, and OpenAI-style tool
definitions, which is the path a server with a tool-call parser takes. Any request can be padded
with seeded reference text to a target length, for long-context traffic.
"""

from __future__ import annotations

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


def _tool_calls(rng):
    site, destination = _distinct(rng, _PLACES, 2)
    goods = rng.choice(_GOODS)
    quantity = rng.randint(20, 400)
    day = rng.choice(_DAYS)
    amount = rng.randint(300, 9000)
    currency = rng.choice(("USD", "GBP", "PLN", "JPY"))
    ask = rng.choice((
        "Check whether %s has %d %s in stock; if it does, book them to %s for %s. Then tell me what %d %s "
        "is in EUR for the invoice.",
        "Before %s we must move %d %s to %s. See what %s holds, schedule the shipment, and convert the %d %s "
        "quote to EUR.",
    ))
    if ask.startswith("Check"):
        text = ask % (site, quantity, goods, destination, day, amount, currency)
    else:
        text = ask % (day, quantity, goods, destination, site, amount, currency)
    return {
        "messages": [
            {"role": "system", "content": "You are the operations assistant of %s. Use the tools to look things up "
                                          "and act; never guess a stock level." % rng.choice(_PEOPLE)},
            {"role": "user", "content": text},
        ],
        "tools": TOOLS,
    }


def _function(name, description, properties, required):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


# OpenAI-style tool definitions, as the server's tool parser and the model's chat template see them.
TOOLS = [
    _function("check_stock", "Units of an item held at a site.",
              {"site": {"type": "string"}, "item": {"type": "string"}}, ["site", "item"]),
    _function("schedule_shipment", "Book a shipment between two sites; returns a booking reference.",
              {"origin": {"type": "string"}, "destination": {"type": "string"}, "item": {"type": "string"},
               "quantity": {"type": "integer"}, "day": {"type": "string"}},
              ["origin", "destination", "item", "quantity"]),
    _function("convert_currency", "Convert an amount between ISO 4217 currencies at today's rate.",
              {"amount": {"type": "number"}, "source": {"type": "string"}, "target": {"type": "string"}},
              ["amount", "source", "target"]),
]

# Sets whose requests are whole chat requests (messages and tools), so they need the chat endpoint.
CHAT_GENERATORS = {
    "tool_calls": _tool_calls,
}


def built_in_requests(prompt_set, count, seed):
    """``count`` requests of a built-in set, or None when ``prompt_set`` names no built-in set.

    Built-in requests come from one seeded stream, so the first ones are the same whatever ``count`` is.
    """
    generator = GENERATORS.get(prompt_set) or CHAT_GENERATORS.get(prompt_set)
    if generator is None:
        return None
    rng = random.Random("%s:%d" % (prompt_set, seed))
    requests = [generator(rng) for dummy in range(count)]
    return [request if isinstance(request, dict) else {"prompt": request} for request in requests]


def reference_text(rng, characters):
    """Seeded report-like text of at least ``characters`` characters, to pad prompts to a long context."""
    parts = []
    size = 0
    while size < characters:
        part = _summarization(rng).split("\n\n")[0]
        parts.append(part)
        size += len(part) + 1
    return "\n".join(parts)


def request_characters(request):
    """Characters of text a request sends (its prompt, or every string message content)."""
    if "prompt" in request:
        return len(request["prompt"])
    return sum(len(message["content"]) for message in request["messages"] if isinstance(message.get("content"), str))


def padded_request(request, characters, rng):
    """The request with reference text put before its first user text so it sends at least ``characters``."""
    missing = characters - request_characters(request)
    if missing <= 0:
        return request
    padding = "Reference material:\n%s\n\n" % reference_text(rng, missing)
    padded = dict(request)
    if "prompt" in padded:
        padded["prompt"] = padding + padded["prompt"]
        return padded
    messages = [dict(message) for message in padded["messages"]]
    for message in messages:
        if message["role"] == "user" and isinstance(message.get("content"), str):
            message["content"] = padding + message["content"]
            break
    else:
        messages.insert(0, {"role": "system", "content": padding.rstrip()})
    padded["messages"] = messages
    return padded
