"""The HF generate engine on the tiny model: EOS masks, determinism, chat templates, stop strings."""
import math

import pytest
import torch

from workbench.models import build_tiny
from workbench.rollout import HFEngine, policy_forward
from workbench.rollout.engine import apply_stop_strings, encode_responses, response_mask
from workbench.train import apply_sets, make_config


def test_response_mask_keeps_tokens_up_to_the_first_eos():
    eos = 2
    ids = torch.tensor([[5, 6, eos, 0, 0], [5, eos, 7, eos, 0], [5, 6, 7, 8, 9]])
    mask, truncated = response_mask(ids, eos)
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    assert truncated.tolist() == [False, False, True]


def test_same_seed_same_samples_and_greedy_is_deterministic(engine):
    prompts = ["12+34=", "5+6="]
    torch.manual_seed(1)
    a = engine.generate(prompts, n=3, max_new_tokens=4)
    torch.manual_seed(1)
    b = engine.generate(prompts, n=3, max_new_tokens=4)
    assert torch.equal(a.response_ids, b.response_ids)
    g1 = engine.generate(prompts, max_new_tokens=4, greedy=True)
    g2 = engine.generate(prompts, max_new_tokens=4, greedy=True)
    assert g1.texts == g2.texts
    with pytest.raises(ValueError, match="at least one prompt"):
        engine.generate([], max_new_tokens=4)
    with pytest.raises(ValueError, match="temperature"):
        engine.generate(prompts, temperature=0.0)


def test_encode_responses_appends_eos_and_right_pads(engine):
    ids, mask = encode_responses(engine.tokenizer, ["12", "3"])
    eos = engine.tokenizer.eos_token_id
    assert ids[0, 2] == eos and ids[1, 1] == eos and mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_chat_template_wraps_prompts_for_instruct_models(tmp_path):
    from workbench.models import build_tiny, load_model, save_model
    from workbench.rollout.engine import encode_prompts
    from workbench.train.evaluate import list_logps

    model, tok = build_tiny(seed=0)
    tok.chat_template = ("{% for m in messages %}U:{{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}A:{% endif %}")
    save_model(model, tok, tmp_path / "instruct")
    with pytest.raises(ValueError, match="no chat template"):
        load_model("tiny", chat_template=True)
    chat_model, chat_tok = load_model(str(tmp_path / "instruct"), chat_template=True)
    ids, mask = encode_prompts(chat_tok, ["1+2=", "12+30="])
    assert chat_tok.decode(ids[1][mask[1] > 0]) == "U:12+30=\nA:"
    plain_ids, _ = encode_prompts(tok, ["12+30="])
    assert tok.decode(plain_ids[0], skip_special_tokens=True) == "12+30="
    gen = HFEngine(chat_model, chat_tok).generate(["1+2="], n=2, max_new_tokens=4)
    assert gen.prompt_ids.shape[0] == 2 and chat_tok.decode(gen.prompt_ids[0]).endswith("U:1+2=\nA:")
    # preference items are scored after the same wrapped prompt
    wrapped, _ = list_logps(chat_model, chat_tok, ["1+2="], [["3"]])
    assert not torch.allclose(wrapped, list_logps(chat_model, tok, ["1+2="], [["3"]])[0])


# The seed-1 tiny model answers these greedily with "="*12, "="*8 + "U"*4 and "==" + "U"*10: "=U" occurs mid-response.
STOP_PROMPTS = ["12+34=", "5+6=", "7+8="]


@pytest.fixture(scope="module")
def engine_seed1():
    model, tokenizer = build_tiny(seed=1)
    return HFEngine(model, tokenizer)


def test_stop_strings_end_responses_at_the_token_completing_them(engine_seed1):
    engine, tok = engine_seed1, engine_seed1.tokenizer
    full = engine.generate(STOP_PROMPTS, max_new_tokens=12, greedy=True)
    assert full.texts == ["=" * 12, "=" * 8 + "U" * 4, "==" + "U" * 10]  # the case the checks below rely on
    gen = engine.generate(STOP_PROMPTS, max_new_tokens=12, greedy=True, stop=["=U"])
    assert gen.texts == ["=" * 12, "=" * 8 + "U", "==U"]  # the stop string is kept
    assert gen.mask.sum(-1).tolist() == [12, 9, 3] and gen.truncated.tolist() == [True, False, False]
    kept = gen.mask > 0
    assert torch.equal(gen.response_ids[kept], full.response_ids[kept])
    assert torch.all(gen.response_ids[~kept] == tok.pad_token_id) and torch.all(gen.mu_logp[~kept] == 0)
    # the trainer scores exactly the kept text: its log-probs equal those of the re-encoded texts (no EOS)
    logp, _, _ = policy_forward(engine.model, gen.prompt_ids, gen.prompt_mask, gen.response_ids, gen.mask)
    ids, mask = encode_responses(tok, gen.texts, eos=[False] * len(gen.texts))
    relogp, _, _ = policy_forward(engine.model, gen.prompt_ids, gen.prompt_mask, ids, mask)
    torch.testing.assert_close((logp * gen.mask).sum(-1), (relogp * mask).sum(-1))
    torch.testing.assert_close(gen.mu_logp, logp * gen.mask, rtol=0, atol=1e-5)
    # generation itself stops once every row has stopped
    early = engine.generate(STOP_PROMPTS[1:], max_new_tokens=12, greedy=True, stop=["=U"])
    assert early.response_ids.shape[1] == 9 and early.texts == gen.texts[1:]
    # with several stop strings the first one completed ends the response
    several = engine.generate(STOP_PROMPTS, max_new_tokens=12, greedy=True, stop=["UU", "=U", "===="])
    assert several.texts == ["====", "====", "==U"] and several.response_ids.shape[1] == 4


def multichar_tokenizer():
    """Tokens of several characters, and the two byte-level halves of "é" (UTF-8 C3 A9, written "Ã" "©")."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "ab": 2, "cde": 3, "fg": 4, "Ã": 5, "©": 6}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")


class WithoutBackend:
    """The same tokenizer without its `tokenizers` backend: the scanner re-decodes prefixes instead."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __getattr__(self, name):
        if name == "backend_tokenizer":
            raise AttributeError(name)
        return getattr(self.tokenizer, name)


@pytest.mark.parametrize("backend", [True, False], ids=["decode_stream", "prefix_decode"])
def test_apply_stop_strings_on_multi_character_and_split_character_tokens(backend):
    tok = multichar_tokenizer()
    tok = tok if backend else WithoutBackend(tok)
    pad, eos, ab, cde, fg, c3, a9 = range(7)
    ids = torch.tensor([[ab, cde, fg, eos],    # "cd" ends inside the token "cde"
                        [c3, a9, ab, cde],     # "é" is completed by its second byte
                        [ab, eos, cde, pad],   # EOS first: a stop string after it is not seen
                        [fg, ab, fg, fg]])     # no stop string, no EOS: truncated
    mask, truncated = response_mask(ids, eos)
    new_ids, new_mask, new_truncated, texts = apply_stop_strings(tok, ids, mask, truncated, ["cd", "é"])
    assert texts == ["abcd", "é", "ab", "fgabfgfg"]  # cut right after the stop string, even inside a token
    assert new_mask.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    assert new_ids.tolist() == [[ab, cde, pad, pad], [c3, a9, pad, pad], [ab, eos, pad, pad], [fg, ab, fg, fg]]
    assert new_truncated.tolist() == [False, False, False, True]
    assert torch.equal(mask, response_mask(ids, eos)[0])  # inputs untouched
    # a stop string spanning two tokens ends at the second; without stop strings only padding and decoding
    assert apply_stop_strings(tok, ids[:1], mask[:1], truncated[:1], ["bc"])[3] == ["abc"]
    assert apply_stop_strings(tok, ids, mask, truncated, None)[3] == ["abcdefg", "\u00e9abcde", "ab", "fgabfgfg"]


def test_stop_strings_are_validated(engine):
    for bad in ([""], "=U", ["a", 3]):
        with pytest.raises(ValueError, match="non-empty strings"):
            engine.generate(["1+2="], max_new_tokens=2, stop=bad)
        with pytest.raises(ValueError, match="non-empty strings"):
            make_config("smoke", stop=bad)
    assert make_config("smoke").stop == []
    assert apply_sets(make_config("smoke"), ['stop=["\\n", "##"]']).stop == ["\n", "##"]


def forward_both_ways(model, gen, monkeypatch, **kw):
    """policy_forward's outputs and parameter gradients with the group's prompt shared (sharing at any saving), then
    with every row run whole (sharing never worth it)."""
    import workbench.rollout.engine as engine_module

    results = []
    for threshold in (0.0, math.inf):
        monkeypatch.setattr(engine_module, "SHARING_MIN_FLOPS", threshold)
        model.zero_grad()
        logp, entropy, hidden = policy_forward(model, gen.prompt_ids, gen.prompt_mask, gen.response_ids, gen.mask,
                                               with_entropy=True, with_hidden=True, **kw)
        ((logp * gen.mask).sum() + 1e-2 * (hidden * gen.mask[..., None]).sum()).backward()
        results.append((logp * gen.mask, entropy * gen.mask, hidden * gen.mask[..., None],
                        [p.grad.clone() for p in model.parameters()]))
    return results


@pytest.mark.parametrize("max_new_tokens", [1, 8])
def test_a_shared_prompt_gives_the_unshared_log_probs_and_gradients(monkeypatch, max_new_tokens):
    """Rows of a group run their prompt once (its keys and values gathered per row): log-probs, entropies, hidden
    states and every parameter's gradient equal the whole-row pass's, to float rounding; one-token responses
    take only the prompt's pass."""
    torch.manual_seed(0)
    model, tok = build_tiny(seed=3)
    gen = HFEngine(model, tok).generate(["12+3=", "7+70=", "5*5="], n=3, max_new_tokens=max_new_tokens)
    (logp, entropy, hidden, grads), (logp_, entropy_, hidden_, grads_) = forward_both_ways(model, gen, monkeypatch)
    assert torch.allclose(logp, logp_, atol=1e-5) and torch.allclose(entropy, entropy_, atol=1e-5)
    assert torch.allclose(hidden, hidden_, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(grads, grads_))
    assert logp.abs().sum() > 0 and all(g.abs().sum() > 0 for g in grads)


def test_shared_prompts_follow_the_rows_in_any_order(monkeypatch):
    """Groups split and shuffled (a minibatch) still get their own prompt's keys and values."""
    import workbench.rollout.engine as engine_module

    monkeypatch.setattr(engine_module, "SHARING_MIN_FLOPS", 0.0)
    torch.manual_seed(0)
    model, tok = build_tiny(seed=3)
    gen = HFEngine(model, tok).generate(["12+3=", "7+70=", "5*5="], n=2, max_new_tokens=6)
    order = torch.tensor([3, 0, 5, 1, 4])
    whole, _, _ = policy_forward(model, gen.prompt_ids, gen.prompt_mask, gen.response_ids, gen.mask)
    picked, _, _ = policy_forward(model, gen.prompt_ids[order], gen.prompt_mask[order], gen.response_ids[order],
                                  gen.mask[order])
    assert torch.allclose(picked * gen.mask[order], whole[order] * gen.mask[order], atol=1e-5)
    assert torch.allclose(whole * gen.mask, gen.mu_logp, atol=1e-5)  # the sampler's own log-probs


def test_a_shared_prefill_samples_what_the_unshared_one_samples(monkeypatch):
    """Generation with each distinct prompt prefilled once (its cache gathered per row) draws the same tokens from
    the same seed, with the same behaviour log-probs and stop-string cuts, as prefilling every row."""
    import workbench.rollout.engine as engine_module

    model, tok = build_tiny(seed=3)
    engine, runs = HFEngine(model, tok), []
    for threshold in (0.0, math.inf):
        monkeypatch.setattr(engine_module, "SHARING_MIN_FLOPS", threshold)
        assert (engine_module.shared_prefix(model, *engine.encode(["12+3=", "7+70="], 3)) is None) == bool(threshold)
        torch.manual_seed(5)
        runs.append(engine.generate(["12+3=", "7+70=", "5*5="], n=4, max_new_tokens=10, stop=["1"]))
    shared, plain = runs
    assert torch.equal(shared.response_ids, plain.response_ids) and shared.texts == plain.texts
    assert torch.allclose(shared.mu_logp, plain.mu_logp, atol=1e-5) and torch.equal(shared.mask, plain.mask)


def test_sharing_is_used_only_where_it_saves_compute():
    from workbench.rollout.engine import prompt_groups

    model, tok = build_tiny(seed=0)
    ids, _ = HFEngine(model, tok).encode(["12+3=", "7+70="], 8)
    assert prompt_groups(model, ids) is None  # 14 rows x 5 tokens of a 0.5M model: less than a model call costs
    big = torch.nn.Linear(10_000, 10_000)  # 100M parameters
    distinct, rows = prompt_groups(big, ids)
    assert torch.equal(distinct[rows], ids) and len(distinct) == 2
