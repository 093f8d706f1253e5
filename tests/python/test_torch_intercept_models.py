"""emulate() on Hugging Face models built from tiny configs with random init (GPT-2, whose linear
layers are transformers' Conv1D; Llama with grouped-query attention; BERT; Mixtral, a mixture of
experts) and torchvision's ResNet-18: every matrix FLOP of a training step emulated (the issue asks 99%),
by the coverage table and by torch's own FlopCounterMode, which sees only the products precsim did
not take (emulated ones run in precsim's engine, not in aten)."""
import pytest

from conftest import need

torch = need("torch")
pt = need("precsim.torch")
transformers = need("transformers")
torchvision = need("torchvision")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_engine_thread")

IDS = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))  # 16 tokens
LM = {"input_ids": IDS, "labels": IDS}
SMALL = dict(vocab_size=64, max_position_embeddings=16)


def gpt2():
    c = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    return transformers.GPT2LMHeadModel(c), LM


def llama():
    c = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                                 intermediate_size=64, **SMALL)
    return transformers.LlamaForCausalLM(c), LM


def bert():
    c = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                **SMALL)
    return transformers.BertForMaskedLM(c), LM


def mixtral():
    c = transformers.MixtralConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                                   intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, **SMALL)
    return transformers.MixtralForCausalLM(c), LM


def resnet18():
    return torchvision.models.resnet18(weights=None, num_classes=10), torch.randn(2, 3, 32, 32)


def step(model, inputs):
    model.zero_grad()
    out = model(**inputs) if isinstance(inputs, dict) else model(inputs)
    (out.loss if hasattr(out, "loss") else out.logsumexp(-1).mean()).backward()


@pytest.mark.parametrize("build", [gpt2, llama, bert, mixtral, resnet18], ids=lambda f: f.__name__)
def test_every_matrix_flop_of_a_step_is_emulated(build):
    torch.manual_seed(0)
    model, inputs = build()
    with FlopCounterMode(display=False) as native:
        step(model, inputs)
    with FlopCounterMode(display=False) as forward, torch.no_grad():
        model(**inputs) if isinstance(inputs, dict) else model(inputs)
    with pt.emulate(model, "mxfp8") as e:
        with FlopCounterMode(display=False) as rest:
            step(model, inputs)
    cov = e.coverage()
    print(f"\n{build.__name__}: {100 * cov.fraction:.2f}% of {cov.total_flops} forward matrix FLOPs emulated; "
          f"FlopCounterMode: {rest.get_total_flops()} of {native.get_total_flops()} forward+backward FLOPs in aten")
    # The issue asks for 99%; these pinned models reach all of it (docs/torch-coverage.md's table).
    assert cov.fraction == 1.0 and cov.total_flops > 0, str(cov)
    assert rest.get_total_flops() == 0 and native.get_total_flops() > 0
    assert cov.total_flops == forward.get_total_flops()  # the table counts the forward products as torch does


def test_hf_gradient_checkpointing_keeps_the_keys():
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(0)
        model, inputs = llama()
        if ckpt:
            model.gradient_checkpointing_enable()
        model.train()
        with pt.emulate(model, "nvfp4"):
            step(model, inputs)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert torch.equal(grads[0], grads[1])
