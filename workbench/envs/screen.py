"""A text screen: fill a form's fields by clicking and typing, then click submit (device control, in text).

The GUI / device-control setting of UI-S1, DigiRL, VL-DAC and HiPER, shrunk to fit a character-level model: a
form of `fields` labelled fields and a submit button, shown as numbered elements; the instruction says which
value (one letter of a tiny vocabulary) goes into which field. The screen lists the fields in the instruction's
order with the submit button anywhere among them (`shuffle=True`: any order). Format, e.g. two fields N (name)
and A (age), instructed N=b and A=d, on a screen whose element 1 is N, 2 submit, 3 A:
    prompt        "N=b A=d 1N_ 2S 3A_"     the instruction, then the screen: id, label, value ("_" empty)
    action        "C1"                     click element 1 (focus it); every element id is a stop string
    observation   "\n1N_* 2S 3A_"          the screen again; "*" marks the focused field
    action        "Tb"                     type b into the focused field (replaces its value); every value is a stop
    observation   "\n1Nb* 2S 3A_"
    ...           "C3" "\n1Nb 2S 3A_*" "Td" "\n1Nb 2S 3Ad*" "C2"   -> submitted: reward 1
Reward 1 iff every field holds its instructed value when submit is clicked (the episode ends at the click,
solved or not); reward 0 when the budget (2 x fields + 1 + `slack` turns) runs out. Errors waste a turn and set
info["tool_error"]: an action that is neither "C<id>" nor "T<value>", a click on an element that does not exist,
typing while no field has focus.

info per state: "state" = the screen's text (the anchor: the same screen is reached by different orders and
detours), "subgoal" = how many fields already hold their instructed value (0 .. fields; the expert fills them
in the instruction's order, so this is the index of the field being worked on: one window per field, the last
one for the submit click), "tool_error". The expert fills the fields in the instruction's order; with
probability `detour` per action it first clicks another field or types a wrong value, while the budget allows.
"""
from __future__ import annotations

import hashlib
import random

from workbench import registry
from workbench.envs.base import Env, check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.tasks.base import Example, Task

LABELS = "NAEPZD"        # field labels (name, age, email, phone, zip, date); never C or T: actions show in a transcript
VALUES = "abcdefgh"      # the value vocabulary: the first `vocab` letters
SUBMIT, EMPTY, FOCUS = "S", "_", "*"
MAX_FIELDS = 3  # 3 fields with slack 2: at most ~190 characters per episode, within the tiny model's 256


def parse_answer(answer: str) -> tuple[int, str, list[tuple[str, str]]]:
    """(budget, layout, instruction) from "budget|layout|instruction": layout = the elements' labels in screen
    order ("ASN": element 1 is field A, 2 submit, 3 field N), instruction = "Nb,Ad" (label, value) in order."""
    budget, layout, instruction = answer.split("|")
    return int(budget), layout, [(pair[0], pair[1:]) for pair in instruction.split(",")]


def solution(layout: str, instruction: list[tuple[str, str]]) -> list[str]:
    """The shortest solving actions: click and type each field in the instruction's order, then click submit."""
    clicks = [f"C{layout.index(label) + 1}" for label, _ in instruction]
    return [a for click, (_, value) in zip(clicks, instruction) for a in (click, f"T{value}")] + \
        [f"C{layout.index(SUBMIT) + 1}"]


def render(layout: str, values: dict[str, str], focus: int | None) -> str:
    """The screen's text: "1A_ 2S 3Nb*" (ids from 1; the focused element marked)."""
    return " ".join(f"{i + 1}{label}{'' if label == SUBMIT else values[label]}{FOCUS if i == focus else ''}"
                    for i, label in enumerate(layout))


@registry.env(
    "screen", title="Text screen: fill a form by clicks and typing, then submit", family="canonical",
    summary="A form of labelled fields and a submit button as numbered text elements; click 'C<id>' to focus, "
            "type 'T<value>' into the focused field, click submit: reward 1 iff every field holds its "
            "instructed value. State = the screen's text.")
class ScreenTask(Task):
    """`fields` fields (labels drawn from N A E P Z D) and a submit button, instructed values from the first `vocab`
    letters.

    Knobs (`task_kw`): fields (2, at most 3: episodes stay within the tiny model's 256 positions), vocab (4, 2..8
    values), slack (turns beyond the expert's 2 x fields + 1, 2), shuffle (False: the screen shows the fields in
    the instruction's order, the submit button anywhere among them; True: any order, so finding a field's element
    is a lookup by label, which the tiny model learns much more slowly), detour (the expert's probability per
    action of a wasted click or a wrong value first, 0.25). Held-out set: data/eval/screen.jsonl (fields, vocab,
    slack, shuffle at the defaults).

    Measured (tiny model, seed 0, 200 held-out episodes, defaults): greedy / sampled (temperature 1, 4 samples)
    success after an SFT warm start of 300 steps 0.265 / 0.17, 375 steps 1.0 / 0.565, 450 steps 1.0 / 0.72,
    600 steps 1.0 / 0.76; a sampled failure is mostly a wrong value submitted (copying the instruction's value
    is what the warm start learns last), rarely the budget.
    """

    name = "screen"
    DEFAULTS = {"fields": 2, "vocab": 4, "slack": 2, "shuffle": False}  # what the examples depend on

    def __init__(self, *, fields: int = 2, vocab: int = 4, slack: int = 2, shuffle: bool = False,
                 detour: float = 0.25):
        check_knob_types("screen", locals(), knob_kinds(ScreenTask))
        check_knob_rules("screen", [
            (not 2 <= fields <= MAX_FIELDS,
             f"2 <= fields <= {MAX_FIELDS} (longer episodes outgrow the tiny model's 256 positions), got {fields}"),
            (not 2 <= vocab <= len(VALUES), f"2 <= vocab <= {len(VALUES)}, got {vocab}"),
            (slack < 0, f"slack >= 0, got {slack}"),
            (not 0 <= detour < 1, f"0 <= detour < 1, got {detour}"),
        ])
        self.fields, self.vocab, self.slack, self.shuffle, self.detour = fields, vocab, slack, shuffle, detour
        self.values = VALUES[:vocab]
        self.ids = tuple(str(i + 1) for i in range(fields + 1))  # the elements: fields and submit
        self.actions = tuple(f"C{i}" for i in self.ids) + tuple(f"T{v}" for v in self.values)
        self.max_turns = 2 * fields + 1 + slack
        params = {"fields": fields, "vocab": vocab, "slack": slack, "shuffle": shuffle}
        self.eval_file = "screen.jsonl" if params == self.DEFAULTS else None  # see AdditionTask

    def make_example(self, rng: random.Random) -> Example:
        labels = rng.sample(LABELS, self.fields)  # in the instruction's order
        instruction = [(label, rng.choice(self.values)) for label in labels]
        if self.shuffle:
            layout = "".join(rng.sample(labels + [SUBMIT], self.fields + 1))
        else:
            at = rng.randint(0, self.fields)
            layout = "".join(labels[:at] + [SUBMIT] + labels[at:])
        screen = render(layout, {label: EMPTY for label in labels}, None)
        return Example(prompt=" ".join(f"{label}={value}" for label, value in instruction) + " " + screen,
                       answer=f"{self.max_turns}|{layout}|{','.join(label + value for label, value in instruction)}",
                       target="".join(solution(layout, instruction)))

    def score(self, completion: str, example: Example) -> float:
        """Replay the actions of `completion` (every "C<id>" / "T<value>" in it, one turn each; the screens in a
        transcript hold neither C nor T) through the environment: 1 iff submitted with every field right."""
        env = self.make_env()
        env.reset(example)
        for k in range(len(completion) - 1):
            if completion[k:k + 2] in self.actions:
                _, reward, done, _ = env.step(completion[k:k + 2])
                if done:
                    return reward
        return 0.0

    def expert_actions(self, example: Example) -> list[str]:
        """`solution` with noise: before each click, with probability `detour`, a click on another field; before
        each typing, a wrong value first; each only while the budget has a spare turn. Seeded by the example."""
        budget, layout, instruction = parse_answer(example.answer)
        rng = random.Random(hashlib.sha256(example.answer.encode()).hexdigest())
        spare, actions = budget - (2 * len(instruction) + 1), []
        for action in solution(layout, instruction):
            if action.startswith("C"):
                target = layout[int(action[1:]) - 1]
                options = [f"C{i + 1}" for i, label in enumerate(layout) if label not in (SUBMIT, target)]
            else:
                options = [f"T{v}" for v in self.values if v != action[1:]]
            if spare >= 1 and rng.random() < self.detour:
                actions.append(rng.choice(options))
                spare -= 1
            actions.append(action)
        return actions

    def make_env(self) -> ScreenEnv:
        return ScreenEnv(self)

    def __repr__(self) -> str:
        return (f"ScreenTask(fields={self.fields}, vocab={self.vocab}, slack={self.slack}, shuffle={self.shuffle}, "
                f"detour={self.detour})")


class ScreenEnv(Env):
    """One episode of a ScreenTask example; the state is the screen's text."""

    subgoals = True  # info["subgoal"]: how many fields hold their instructed value (HiPER's windows)

    def __init__(self, task: ScreenTask):
        self.task = task
        self.stop = task.ids + tuple(task.values)  # the last character of every action
        self.max_turns = task.max_turns
        self.budget, self.layout, self.wanted, self.values, self.focus, self.turns = 0, None, {}, {}, None, 0

    def reset(self, example: Example, seed: int | None = None):
        self.budget, self.layout, instruction = parse_answer(example.answer)
        self.wanted = dict(instruction)
        self.values, self.focus, self.turns = {label: EMPTY for label in self.wanted}, None, 0
        return [user(example.prompt)], self.info()

    def actions(self) -> list[str]:
        """Every action this environment tells apart: all clicks, all values typed."""
        return list(self.task.actions)

    def screen(self) -> str:
        return render(self.layout, self.values, self.focus)

    def filled(self) -> int:
        """How many fields hold their instructed value."""
        return sum(self.values[label] == value for label, value in self.wanted.items())

    def info(self, error: str | None = None) -> dict:
        return {"state": self.screen(), "subgoal": self.filled(), "tool_error": error}

    def act(self, action: str) -> tuple[bool, str | None]:
        """Apply one action: (submitted, error)."""
        kind, arg = action[:1], action[1:]
        if kind == "C" and arg.isdigit():
            index = int(arg) - 1
            if not 0 <= index < len(self.layout):
                return False, f"no element {arg} (ids 1..{len(self.layout)})"
            if self.layout[index] == SUBMIT:
                return True, None
            self.focus = index
            return False, None
        if kind == "T" and arg in self.task.values:
            if self.focus is None:
                return False, "no field has focus: click one first (C<id>)"
            self.values[self.layout[self.focus]] = arg
            return False, None
        return False, f"not an action: C<id> or T<value> ({' '.join(self.task.values)})"

    def step(self, action: str):
        if self.layout is None:
            raise RuntimeError("step before reset")
        submitted, error = self.act(action[-2:])
        self.turns += 1
        won = submitted and self.filled() == len(self.wanted)
        done = submitted or self.turns >= self.budget
        return [tool("\n" + self.screen())], float(won), done, self.info(error)
