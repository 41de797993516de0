"""SRPO's sample routing: the objective's math (catalog tests 1-3, the forward-KL gradient, the entropy weights, the
top-K tail), the routes and the self-teacher's context and rows, the trainer's teacher pass and live logits, the
refusals, and a training run that resumes exactly."""
import math

import pytest
import torch

import workbench.recipes.routing  # noqa: F401  (registers the recipe; recipes/__init__.py does not list it yet)
from tests.helpers import D, TINY, DigitFirst, anchor_mask, metric_rows, resumes_exactly, seeded
from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.models import char_tokenizer
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.srpo_route import (GRPO_CORRECT, GRPO_FALLBACK, SDPO, SRPO_TITLE, entropy_weights,
                                             forward_kl, srpo_route, with_tail)
from workbench.recipes import get_recipe, with_overrides
from workbench.rollout import Sampling, turns
from workbench.rollout.engine import encode_prompts, policy_forward
from workbench.tasks.base import Example
from workbench.train.config import make_config
from workbench.train.glossary import unexplained
from workbench.train.pipeline import Pipeline
from workbench.train.trainer import Trainer, training_forward
from workbench.transforms.srpo_teacher import TEACHER_TEMPLATE, routes, srpo_teacher

pytestmark = pytest.mark.covers("srpo-route")
RECIPE = get_recipe("srpo-route")


def routed(seed: int, route=(GRPO_CORRECT, SDPO, GRPO_FALLBACK, SDPO, GRPO_CORRECT, SDPO), T=5, V=7, spread=0.5):
    """Random minibatch inputs over a mask with holes: logits leaf [B, T, V], logp of sampled ids from them, old
    log-probs `spread` away (ratios far from 1: the clip binds), advantages, a random teacher over the whole
    vocabulary (0 off the mask, as stored) and its entropy."""
    g, B = seeded(seed), len(route)
    mask = anchor_mask(B, T, g, holes=True)
    logits = torch.randn(B, T, V, generator=g, dtype=D).requires_grad_(True)
    ids = torch.randint(V, (B, T), generator=g)
    logp = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    old = logp.detach() + spread * torch.randn(B, T, generator=g, dtype=D)
    A = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * mask
    teacher = torch.log_softmax(2 * torch.randn(B, T, V, generator=g, dtype=D), -1) * mask[..., None]
    H = ops.entropy_from_logits(teacher).to(D) * mask
    fields = dict(logits=logits, route=torch.tensor(route), teacher_logp=teacher, teacher_ids=None, teacher_entropy=H)
    return logp, old, A, mask, fields


def grad(y, x):
    return torch.autograd.grad(y, x, retain_graph=True, allow_unused=True)[0]


def test_registered_with_the_catalog_title_and_the_recipe_settings():
    objective, transform = registry.get("objective", "srpo-route"), registry.get("group_transform", "srpo-route")
    assert objective.title == transform.title == RECIPE.title == SRPO_TITLE == registry.catalog()["srpo-route"]["title"]
    assert objective.defaults == {"agg": "token-mean", "denom": None, "beta": 1.0, "eps_low": 0.2, "eps_high": 0.2,
                                  "logr_clamp": None}
    assert objective.reads == ("logits", "route", "teacher_logp", "teacher_ids", "teacher_entropy")
    assert transform.defaults == {"template": TEACHER_TEMPLATE, "topk": 0, "threshold": 1.0}
    assert transform.provides == ("route", "teacher_logp", "teacher_ids", "teacher_entropy")
    assert RECIPE.objective.kw == {"beta": 1.0, "eps_low": 0.2, "eps_high": 0.2} and RECIPE.agg == "token-mean"
    assert [u.key for u in RECIPE.group_transforms] == ["srpo-route"] and RECIPE.regularizers == ()
    assert TEACHER_TEMPLATE.format(prompt="P", hint="S") == ("P\nCorrect solution:\n\nS\n\n\n\nCorrectly solve the "
                                                            "original question.\n")


# ------------------------------------------------------------------------------------------------------- the objective

@pytest.mark.parametrize("seed", range(3))
def test_catalog_1_every_row_routed_to_grpo_is_ppo_clip_exactly(seed):
    """Correct rows and failed rows without a teacher: the loss and its gradient (w.r.t. the logits the log-probs come
    from) are ppo-clip's, bit for bit, whatever the teacher fields hold."""
    logp, old, A, mask, fields = routed(seed, route=(GRPO_CORRECT, GRPO_FALLBACK) * 3)
    ours, m = srpo_route(logp, old, A, mask, **fields)
    theirs, m_ppo = ppo_clip(logp, old, A, mask)
    assert torch.equal(ours, theirs) and torch.equal(grad(ours, fields["logits"]), grad(theirs, fields["logits"]))
    assert m_ppo["clip/region"] > 0 and all(m[k] == v for k, v in m_ppo.items())
    assert m["srpo/distill_token_frac"] == m["srpo/distill_kl"] == m["srpo/teacher_entropy"] == 0.0


def test_catalog_2_beta_zero_weighs_every_distilled_token_one():
    H = torch.tensor([0.1, 2.0, 4.5, 0.0], dtype=D)
    assert torch.equal(entropy_weights(H, 0.0), torch.ones(4, dtype=D))
    w = entropy_weights(H, 1.0)  # exp(-H) / mean exp(-H): mean 1, confident positions weigh more
    assert torch.allclose(w, torch.exp(-H) / torch.exp(-H).mean()) and float(w.mean()) == pytest.approx(1.0)
    logp, old, A, mask, fields = routed(0, route=(SDPO,) * 4)
    loss, m = srpo_route(logp, old, A, mask, beta=0.0, **fields)
    teacher = fields["teacher_logp"]
    kl = forward_kl(teacher, torch.log_softmax(fields["logits"], -1))  # the unweighted per-token KL
    assert torch.allclose(loss, ops.masked_mean(kl, mask))
    assert m["srpo/distill_kl"] == pytest.approx(float(loss.detach()))


def test_the_weights_follow_the_teacher_entropy_with_mean_one_over_the_minibatch_distilled_tokens():
    logp, old, A, mask, fields = routed(1, route=(SDPO,) * 4)
    loss, _ = srpo_route(logp, old, A, mask, beta=1.0, **fields)
    sdpo = mask > 0
    kl = forward_kl(fields["teacher_logp"], torch.log_softmax(fields["logits"], -1))[sdpo]
    e = torch.exp(-fields["teacher_entropy"][sdpo])
    assert torch.allclose(loss, (e / e.mean() * kl).sum() / mask.sum())


@pytest.mark.parametrize("topk", [None, 3])
def test_catalog_3_a_student_equal_to_its_teacher_has_zero_loss_and_gradient(topk):
    logp, old, A, mask, fields = routed(2, route=(SDPO,) * 5)
    student = torch.log_softmax(fields["logits"], -1).detach() * mask[..., None]
    fields["teacher_logp"] = student
    if topk:
        fields["teacher_logp"], fields["teacher_ids"] = student.topk(topk, dim=-1)
    loss, m = srpo_route(logp, old, A, mask, **fields)
    assert abs(float(loss.detach())) < 1e-15 and float(grad(loss, fields["logits"]).abs().max()) < 1e-15
    assert m["srpo/distill_kl"] == pytest.approx(0.0, abs=1e-15) and m["srpo/distill_token_frac"] == 1.0


def test_catalog_3_no_distilled_token_gives_no_nan():
    """No row routed to SDPO but one whose response is all masked out: no SDPO token, a batch storing K = 0 teacher
    columns; loss and gradients finite, the distillation metrics 0."""
    logp, old, A, mask, fields = routed(3, route=(GRPO_CORRECT, SDPO, GRPO_FALLBACK, GRPO_CORRECT))
    mask[1] = 0.0
    fields.update(teacher_logp=torch.zeros(4, 5, 0, dtype=D), teacher_entropy=torch.zeros(4, 5, dtype=D))
    loss, m = srpo_route(logp, old, A * mask, mask, **fields)
    assert bool(torch.isfinite(loss)) and bool(torch.isfinite(grad(loss, fields["logits"])).all())
    assert m["srpo/distill_token_frac"] == m["srpo/distill_kl"] == m["srpo/teacher_entropy"] == 0.0


def test_the_forward_kl_gradient_on_the_student_logits_is_w_times_pi_minus_teacher():
    """Row 0 distils on two tokens (known pi, teacher and entropies), row 1 is GRPO on one token: d loss / d u_t =
    w_t (pi_t - q_t) / 3 with w = 2 softmax(-H) = (2 / (1 + e^-1), 2 e^-1 / (1 + e^-1)), and row 1's logits get
    only PPO's gradient."""
    pi = torch.tensor([[[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], [[0.4, 0.4, 0.2], [1 / 3, 1 / 3, 1 / 3]]], dtype=D)
    q = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], dtype=D)
    logits = pi.log().requires_grad_(True)
    ids = torch.tensor([[2, 0], [1, 0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=D)
    logp = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    A = torch.tensor([[0.3, 0.3], [-1.0, 0.0]], dtype=D)
    H = torch.tensor([[0.5, 1.5], [0.0, 0.0]], dtype=D)
    teacher = torch.where(q > 0, q.clamp(min=1e-300).log(), torch.zeros_like(q))
    loss, m = srpo_route(logp, logp.detach(), A, mask, logits=logits, route=torch.tensor([SDPO, GRPO_CORRECT]),
                         teacher_logp=teacher, teacher_ids=None, teacher_entropy=H)
    w = torch.tensor([2 / (1 + math.exp(-1)), 2 * math.exp(-1) / (1 + math.exp(-1))], dtype=D)
    g = grad(loss, logits)
    assert torch.allclose(g[0], w[:, None] * (pi[0] - q[0]) / 3, atol=1e-14)
    assert torch.allclose(g[0, 0], torch.tensor([-0.3, 0.05, 0.25], dtype=D) * 1.4621171572600098 / 3, atol=1e-12)
    ppo_grad = -A[1, 0] * (torch.nn.functional.one_hot(ids[1, 0], 3).to(D) - pi[1, 0]) / 3  # ratio 1: -A d log p
    assert torch.allclose(g[1, 0], ppo_grad, atol=1e-14) and torch.equal(g[1, 1], torch.zeros(3, dtype=D))
    kl = (q[0] * (q[0].log() - pi[0].log())).sum(-1)
    assert float(loss.detach()) == pytest.approx(float(((w * kl).sum() + 1.0) / 3))  # row 1: -A r = 1 at r = 1
    assert m["srpo/distill_kl"] == pytest.approx(float(kl.mean())) and m["srpo/teacher_entropy"] == 1.0
    assert m["srpo/distill_token_frac"] == pytest.approx(2 / 3)


def test_the_top_k_kl_is_the_teachers_k_ids_plus_a_tail_bucket_a_lower_bound():
    q, pi = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=D), torch.full((4,), 0.25, dtype=D)
    top, ids = q.log().topk(2)
    kl = forward_kl(with_tail(top), with_tail(pi.log()[ids]))
    assert float(kl) == pytest.approx(0.5 * math.log(2) + 0.3 * math.log(0.3 / 0.25) + 0.2 * math.log(0.2 / 0.5))
    assert float(kl) < float(forward_kl(q.log(), pi.log()))
    assert float(forward_kl(with_tail(q.log()), with_tail(pi.log()))) == pytest.approx(
        float(forward_kl(q.log(), pi.log())), abs=1e-6)  # all V ids: the tail holds ~1e-7


def test_bad_inputs_are_refused_naming_the_field():
    logp, old, A, mask, fields = routed(0)
    with pytest.raises(ValueError, match="beta=-0.5"):
        srpo_route(logp, old, A, mask, beta=-0.5, **fields)
    with pytest.raises(ValueError, match="route has shape"):
        srpo_route(logp, old, A, mask, **{**fields, "route": fields["route"][:3]})
    with pytest.raises(ValueError, match="teacher_logp has shape"):
        srpo_route(logp, old, A, mask, **{**fields, "teacher_logp": fields["teacher_logp"][:, :2]})
    with pytest.raises(ValueError, match="reads the training forward's logits"):
        srpo_route(logp, old, A, mask, **{**fields, "logits": None})


# -------------------------------------------------------------------------------------------- routes and the teacher

@pytest.mark.parametrize("order", [None, [6, 0, 3, 7, 1, 4, 8, 2, 5]])
def test_routes_by_correctness_and_a_correct_sibling(order):
    """Group 0 mixes (its failed row distils from the first correct one), group 1 all failed (fallback), group 2
    mixes; in any row order the sibling is the first correct row of the group in batch order."""
    correct = torch.tensor([False, True, True, False, False, False, True, True, False])
    group = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    index = torch.arange(9) if order is None else torch.tensor(order)
    route, sibling = routes(correct[index], group[index])
    expected = torch.tensor([SDPO, GRPO_CORRECT, GRPO_CORRECT, *[GRPO_FALLBACK] * 3, GRPO_CORRECT, GRPO_CORRECT, SDPO])
    assert torch.equal(route, expected[index])
    for pos, r in enumerate(route.tolist()):
        right = [p for p in range(9) if group[index[p]] == group[index[pos]] and correct[index[p]]]
        assert sibling[pos] == (right[0] if r == SDPO else -1)


EXAMPLES = [Example(prompt="3?", answer="", target="1"), Example(prompt="7?", answer="", target="1")]


def hand_batch(scores=(1.0, 0.0, 0.0, 0.0, 0.0, 1.0), T=4, last="c5") -> RolloutBatch:
    """Two groups of three rows over char-tokenizer ids, completions c<i> (the last one `last`)."""
    n = len(scores)
    mask = torch.tensor([[1.0] * (1 + i % 3) + [0.0] * (T - 1 - i % 3) for i in range(n)])
    s = torch.tensor(scores)
    return RolloutBatch(response_ids=10 + torch.arange(n * T).view(n, T) % 40, mask=mask,
                        group=torch.arange(2).repeat_interleave(3), rewards=s.clone(), scores=s,
                        completions=[f"c{i}" for i in range(n - 1)] + [last],
                        prompts=[EXAMPLES[i // 3].prompt for i in range(n)])


class Scorer:
    """ctx.vocab_logp stand-in: records each teacher batch; log-probs over V = 5 that depend on the response ids."""

    def __init__(self):
        self.calls = []

    def __call__(self, batch):
        self.calls.append(batch)
        u = torch.stack([batch.response_ids.float() * k / 40 for k in range(5)], -1)
        return torch.log_softmax(u, -1) * batch.mask[..., None]


class Engine:
    def __init__(self, max_length=256):
        self.tokenizer, self.max_length = char_tokenizer(), max_length


def context(scorer, engine=None):
    return StepContext(step=0, total_steps=1, seed=0, group_size=3, prompts_per_step=2, max_new_tokens=4,
                       examples=EXAMPLES, vocab_logp=scorer, engine=engine or Engine(), task=DigitFirst())


def test_the_teacher_reads_the_correct_sibling_and_scores_exactly_the_failed_rows_tokens():
    scorer, batch = Scorer(), hand_batch()
    ctx = context(scorer)
    out = srpo_teacher(batch, ctx)
    assert out.route.tolist() == [GRPO_CORRECT, SDPO, SDPO, SDPO, SDPO, GRPO_CORRECT]
    (call,) = scorer.calls
    rows = [1, 2, 3, 4]
    assert torch.equal(call.response_ids, batch.response_ids[rows]) and torch.equal(call.mask, batch.mask[rows])
    tok = ctx.engine.tokenizer
    contexts = [tok.decode(ids[m > 0], skip_special_tokens=True) for ids, m in zip(call.prompt_ids, call.prompt_mask)]
    assert contexts == [TEACHER_TEMPLATE.format(prompt="3?", hint="c0")] * 2 + \
        [TEACHER_TEMPLATE.format(prompt="7?", hint="c5")] * 2
    assert torch.equal(call.prompt_ids, encode_prompts(tok, contexts)[0])  # as the rollout encodes a prompt
    q = scorer(batch.select(torch.tensor(rows)))
    assert torch.equal(out.teacher_logp[rows], q) and out.teacher_ids is None
    assert torch.allclose(out.teacher_entropy[rows], ops.entropy_from_logits(q) * batch.mask[rows])
    assert out.teacher_logp[[0, 5]].abs().sum() == 0 and out.teacher_entropy[[0, 5]].abs().sum() == 0
    assert ctx.metrics == pytest.approx({"srpo/route_correct": 2 / 6, "srpo/route_distill": 4 / 6,
                                         "srpo/route_fallback": 0.0, "srpo/teacher_cut": 0.0})


def test_top_k_storage_keeps_the_teachers_k_most_likely_ids_and_the_whole_entropy():
    scorer = Scorer()
    out = srpo_teacher(hand_batch(), context(scorer), topk=2)
    full = scorer(hand_batch().select(torch.tensor([1, 2, 3, 4])))
    top, ids = full.topk(2, dim=-1)
    m = hand_batch().mask[[1, 2, 3, 4]]
    assert torch.equal(out.teacher_ids[[1, 2, 3, 4]], ids) and torch.equal(out.teacher_logp[[1, 2, 3, 4]],
                                                                            top * m[..., None])
    assert torch.allclose(out.teacher_entropy[[1, 2, 3, 4]], ops.entropy_from_logits(full) * m)


def test_no_correct_row_no_teacher_pass_and_a_teacher_past_the_models_positions_falls_back():
    scorer = Scorer()
    out = srpo_teacher(hand_batch(scores=(0.0,) * 6), context(scorer))
    assert scorer.calls == [] and out.route.tolist() == [GRPO_FALLBACK] * 6 and out.teacher_logp.shape == (6, 4, 0)
    limit = len(TEACHER_TEMPLATE.format(prompt="3?", hint="c0")) + 1 + 4  # <bos>, group 0's context and T = 4
    ctx = context(scorer, Engine(max_length=limit))
    out = srpo_teacher(hand_batch(last="a longer sibling"), ctx)
    assert out.route.tolist() == [GRPO_CORRECT, SDPO, SDPO, GRPO_FALLBACK, GRPO_FALLBACK, GRPO_CORRECT]
    assert ctx.metrics["srpo/teacher_cut"] == pytest.approx(2 / 6) and out.teacher_logp[[3, 4]].abs().sum() == 0
    scorer = Scorer()
    ctx = context(scorer, Engine(max_length=limit - 1))
    out = srpo_teacher(hand_batch(), ctx)
    assert ctx.metrics["srpo/teacher_cut"] == pytest.approx(4 / 6) and scorer.calls == []
    assert out.route.tolist() == [GRPO_CORRECT] + [GRPO_FALLBACK] * 4 + [GRPO_CORRECT]


def test_under_data_parallelism_every_rank_runs_as_many_teacher_forwards_as_the_busiest():
    """FSDP's forward is a collective: with another rank scoring 3 chunks, this one (1 chunk) scores its chunk,
    then row 0 twice, discarded."""
    scorer = Scorer()
    ctx = context(scorer)
    ctx.gather = lambda x: torch.cat([x, torch.tensor([3])]) if x.dtype == torch.long else torch.cat([x, x])
    out = srpo_teacher(hand_batch(), ctx)
    assert [len(c.response_ids) for c in scorer.calls] == [4, 1, 1]
    assert torch.equal(scorer.calls[1].response_ids, hand_batch().response_ids[:1])
    assert torch.equal(out.teacher_logp[[1, 2, 3, 4]], Scorer()(scorer.calls[0]))  # the dummy rounds store nothing
    assert ctx.metrics["srpo/route_distill"] == pytest.approx(4 / 6)


@pytest.mark.parametrize("settings, field", [({"template": "{hint} only"}, "template"),
                                             ({"template": "no fields"}, "template"), ({"topk": -1}, "topk"),
                                             ({"threshold": math.nan}, "threshold")])
def test_bad_teacher_settings_are_refused_naming_them(settings, field):
    with pytest.raises(ValueError, match=field):
        srpo_teacher(hand_batch(), context(Scorer()), **settings)


# -------------------------------------------------------------------------------------- the trainer and the recipe

@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    t = Trainer(make_config("smoke", recipe="srpo-route", **TINY), tmp_path_factory.mktemp("srpo") / "run",
                progress=False)
    t.task = DigitFirst()
    t.build_models()
    return t


def test_the_trainers_teacher_pass_is_the_policys_whole_distribution(trainer):
    batch = turns(trainer.engine, trainer.task, EXAMPLES, group_size=2, sampling=Sampling(4))
    q = trainer.vocab_logp(batch)
    assert q.shape[-1] == trainer.model.config.vocab_size and not q.requires_grad
    picked = q.gather(-1, batch.response_ids[..., None]).squeeze(-1)
    assert torch.allclose(picked, trainer.score(batch, trainer.config.temperature), atol=1e-6)
    assert torch.allclose(q.exp().sum(-1) * batch.mask, batch.mask, atol=1e-5)


def test_the_transform_scores_the_failed_rows_under_the_teacher_prompt_on_the_model(trainer):
    batch = turns(trainer.engine, trainer.task, EXAMPLES, group_size=3, sampling=Sampling(4))
    batch.scores = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    ctx = trainer.context(0)
    ctx.examples = EXAMPLES
    out = srpo_teacher(batch, ctx)
    assert out.route.tolist() == [SDPO, GRPO_CORRECT, SDPO] + [GRPO_FALLBACK] * 3
    prompt_ids, prompt_mask = encode_prompts(trainer.tokenizer, [TEACHER_TEMPLATE.format(
        prompt=EXAMPLES[0].prompt, hint=batch.completions[1])] * 2)
    rows = torch.tensor([0, 2])
    teacher = RolloutBatch(response_ids=batch.response_ids[rows], mask=batch.mask[rows], group=batch.group[rows],
                           prompt_ids=prompt_ids, prompt_mask=prompt_mask)
    assert torch.allclose(out.teacher_logp[rows], trainer.vocab_logp(teacher), atol=1e-6)
    assert not torch.allclose(out.teacher_logp[rows], trainer.vocab_logp(batch.select(rows)), atol=1e-3)


def test_the_live_logits_come_with_the_log_probs_of_the_same_forward_and_only_when_read(trainer):
    batch = turns(trainer.engine, trainer.task, EXAMPLES, group_size=2, sampling=Sampling(4))
    logp, entropy, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                      batch.mask, 0.7, with_entropy=True)
    live_logp, live_entropy, _, logits = training_forward(trainer.model, batch, 0.7, with_entropy=True,
                                                          with_hidden=False, with_logits=True)
    assert torch.equal(live_logp, logp) and torch.equal(live_entropy, entropy) and logits.requires_grad
    assert torch.allclose(torch.log_softmax(logits, -1).gather(-1, batch.response_ids[..., None]).squeeze(-1), logp,
                          atol=1e-6)
    *_, none = training_forward(trainer.model, batch, 0.7, with_entropy=False, with_hidden=False, with_logits=False)
    assert none is None


def test_the_trainer_fills_the_minibatchs_logits_for_the_objective(trainer):
    batch = trainer.make_batch(0)
    assert batch.route is not None and batch.teacher_logp.shape[:2] == batch.mask.shape
    denom = ops.Denominators.of(batch.mask)
    loss, metrics = trainer.minibatch_loss(batch, denom)
    assert batch.logits.shape == (*batch.mask.shape, trainer.model.config.vocab_size) and batch.logits.requires_grad
    assert bool(torch.isfinite(loss)) and "srpo/distill_kl" in metrics


@pytest.mark.parametrize("overrides, field", [
    ({"objective": {"beta": -1.0}}, "beta"),
    ({"group_transforms:srpo-route": {"template": "{hint}"}}, "template"),
    ({"group_transforms:srpo-route": {"topk": -3}}, "topk"),
    ({"group_transforms": []}, "reads"),  # the objective without its teacher: no route, no teacher fields
])
def test_bad_settings_are_refused_before_training(overrides, field, tmp_path):
    with pytest.raises(ValueError, match=field):
        Pipeline(with_overrides(RECIPE, overrides))
    with pytest.raises(ValueError, match=field):
        Trainer(make_config("smoke", recipe="srpo-route", recipe_overrides=overrides, **TINY), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_distils_and_resumes_exactly(tmp_path):
    """DigitFirst: about one sample in ten is right, so groups mix and failed rows distil."""
    assert resumes_exactly(make_config("smoke", recipe="srpo-route", **TINY), tmp_path, task=DigitFirst())
    rows = metric_rows(tmp_path / "straight")
    assert len(rows) == TINY["steps"] and any(r["grad_norm"] > 0 for r in rows)
    assert not unexplained(set().union(*rows))  # every metric in the glossary, the routes' and the objective's too
    assert any(r["srpo/route_distill"] > 0 and r["srpo/distill_kl"] > 0 for r in rows)
    assert all(r["srpo/route_correct"] + r["srpo/route_distill"] + r["srpo/route_fallback"] == pytest.approx(1.0)
               for r in rows)
