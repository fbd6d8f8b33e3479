"""Writes the PyTorch reference data for the model files written as published code is (samples/gpt.py after
nanoGPT, the model file of samples/train_gpt, vae.py, dcgan.py and word_lm.py after PyTorch's examples), which tests/test_script_published.cpp compares kiln
with. torch.jit.script takes none of them as published (nanoGPT's config object, DCGAN's data_parallel
branch), so the references are eager PyTorch's. Keys: `state.*` (the state_dict as built under seed 0),
`input.*`, `output.*` (eval mode, no grad), `trained.*` (the state after the training steps noted per model),
`gan_*` (DCGAN: three iterations of the examples' training loop).
Run with /usr/bin/python3 (PyTorch 1.13) from the repository root:
    python3 tests/script/models/make_published_fixtures.py tests/script/models/data
"""
import importlib.util
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import load, randomize_batch_norm, save  # noqa: E402


def state(prefix, model):
    return {f"{prefix}.{k}": v.clone() for k, v in model.state_dict().items()}


def sgd_on_own_loss(model, idx, targets, steps=3):
    """SGD (lr 0.1) on the loss a GPT returns beside its logits, in training mode; the losses of the steps."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        _, loss = model(idx, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    return losses


def gpt():
    # A GPT of two blocks; torch 1.13 has no scaled_dot_product_attention, so the masked-softmax path runs.
    spec = importlib.util.spec_from_file_location("gpt", os.path.join(HERE, "..", "..", "..", "samples", "gpt.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    model = mod.GPT(mod.GPTConfig(block_size=8, vocab_size=16, n_layer=2, n_head=2, n_embd=8, dropout=0.0, bias=True))
    out = state("state", model)
    idx = torch.randint(0, 16, (2, 6))
    targets = torch.randint(0, 16, (2, 6))
    targets[1, 4:] = -1  # ignored positions
    out.update({"input.0": idx, "input.1": targets})
    model.eval()
    with torch.no_grad():
        logits, loss = model(idx)
        assert loss is None
        out["output.0"] = logits  # the last position only: (2, 1, 16)
        logits, loss = model(idx, targets)
        out["output.1"], out["output.2"] = logits, loss
    # Three SGD steps on the model's own loss (dropout 0, so train mode computes what eval does).
    sgd_on_own_loss(model, idx, targets)
    out.update(state("trained", model))
    # Without biases (LayerNorm's bias None), eval logits of every position.
    torch.manual_seed(1)
    nobias = mod.GPT(mod.GPTConfig(block_size=8, vocab_size=16, n_layer=1, n_head=2, n_embd=8, dropout=0.1, bias=False))
    out.update(state("nobias_state", nobias))
    nobias.eval()
    with torch.no_grad():
        out["nobias_output.0"] = nobias(idx, targets)[0]
    return out


def vae():
    # forward draws eps with randn_like, so only mu and logvar are compared; decode(mu) and the loss of it too.
    mod = load("vae")
    torch.manual_seed(0)
    model = mod.VAE(16, 12, 4)
    out = state("state", model)
    x = torch.rand(3, 16)
    out["input.0"] = x
    model.eval()
    with torch.no_grad():
        recon, mu, logvar = model(x)
        assert recon.shape == (3, 16)
        out["output.0"], out["output.1"] = mu, logvar
        out["output.2"] = model.decode(mu)
        out["output.3"] = mod.loss_function(out["output.2"], x, mu, logvar, 16)
    return out


def dcgan():
    # A Generator and Discriminator built by the file's build() (weights_init applied), batch norm statistics
    # randomized; eval outputs, and the Generator's training-mode output and running statistics after one call.
    mod = load("dcgan")
    torch.manual_seed(0)
    net_g, net_d = mod.build(ngpu=1, nz=8, ngf=4, ndf=4, nc=3)
    randomize_batch_norm(net_g)
    randomize_batch_norm(net_d)
    out = {**state("state_g", net_g), **state("state_d", net_d)}
    z = torch.randn(2, 8, 1, 1)
    out["input.0"] = z
    net_g.eval()
    net_d.eval()
    with torch.no_grad():
        fake = net_g(z)
        out["output.0"] = fake  # (2, 3, 64, 64)
        out["output.1"] = net_d(fake)  # (2,)
        net_g.train()
        out["train_output.0"] = net_g(z)
    out.update(state("trained_g", net_g))
    # Three iterations of the examples' training loop from the saved state, in training mode: the
    # Discriminator on a real batch (label 1) and a fake one (label 0, detached), then the Generator through
    # the Discriminator (label 1); BCELoss, Adam(lr 2e-4, betas (0.5, 0.999)) for each, as main.py has them.
    net_g.load_state_dict({k[len("state_g."):]: v for k, v in out.items() if k.startswith("state_g.")})
    net_d.load_state_dict({k[len("state_d."):]: v for k, v in out.items() if k.startswith("state_d.")})
    net_g.train()
    net_d.train()
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for i in range(3):
        real = torch.rand(2, 3, 64, 64) * 2 - 1
        noise = torch.randn(2, 8, 1, 1)
        out[f"gan_real.{i}"], out[f"gan_noise.{i}"] = real, noise
        opt_d.zero_grad()
        err_real = F.binary_cross_entropy(net_d(real), torch.ones(2))
        err_real.backward()
        fake = net_g(noise)
        err_fake = F.binary_cross_entropy(net_d(fake.detach()), torch.zeros(2))
        err_fake.backward()
        opt_d.step()
        opt_g.zero_grad()
        err_g = F.binary_cross_entropy(net_d(fake), torch.ones(2))
        err_g.backward()
        opt_g.step()
        out[f"gan_loss.{i}"] = torch.stack([err_real, err_fake, err_g]).detach()
    out.update(state("gan_g", net_g))
    out.update(state("gan_d", net_d))
    return out


def word_lm():
    # The GRU variant with tied weights; eval outputs for the state init_hidden gives.
    mod = load("word_lm")
    torch.manual_seed(0)
    model = mod.RNNModel("GRU", 20, 8, 8, 2, 0.2, True)
    out = state("state", model)
    tokens = torch.randint(0, 20, (5, 3))
    hidden = model.init_hidden(3)
    out["input.0"], out["input.1"] = tokens, hidden
    model.eval()
    with torch.no_grad():
        out["output.0"], out["output.1"] = model(tokens, hidden)
    # The LSTM variant (its state an (h, c) tuple through the unannotated `hidden`) on a random state, and the
    # RNN_TANH / RNN_RELU ones (the nonlinearity looked up inside a try), eval outputs on the same tokens.
    torch.manual_seed(1)
    lstm = mod.RNNModel("LSTM", 20, 8, 6, 2, 0.2)
    out.update(state("lstm_state", lstm))
    h0, c0 = torch.randn(2, 3, 6), torch.randn(2, 3, 6)
    out["lstm_input.0"], out["lstm_input.1"] = h0, c0
    lstm.eval()
    with torch.no_grad():
        out["lstm_output.0"], (out["lstm_output.1"], out["lstm_output.2"]) = lstm(tokens, (h0, c0))
    for kind in ("RNN_TANH", "RNN_RELU"):
        torch.manual_seed(2)
        rnn = mod.RNNModel(kind, 20, 8, 6, 1, 0.0)
        out.update(state(kind.lower() + "_state", rnn))
        rnn.eval()
        with torch.no_grad():
            out[kind.lower() + "_output.0"], out[kind.lower() + "_output.1"] = rnn(tokens, h0[:1])
    # Three SGD steps (lr 0.1) in training mode with dropout 0, NLLLoss on the log-probabilities, each from
    # init_hidden's zero state: the LSTM and GRU variants' losses and trained states.
    for kind in ("LSTM", "GRU"):
        torch.manual_seed(3)
        model = mod.RNNModel(kind, 20, 8, 6, 2, 0.0)
        key = "train_" + kind.lower()
        out.update(state(key + "_state", model))
        target = torch.randint(0, 20, (15,))
        out[key + "_target"] = target
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for i in range(3):
            output, _ = model(tokens, model.init_hidden(3))
            loss = F.nll_loss(output, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out[f"{key}_loss.{i}"] = loss.detach().clone()
        out.update(state(key + "_trained", model))
    return out


def unet(bilinear=False):
    # The U-Net on an odd-sized image (17x19: the up path pads to the skip's size), its up path a transposed
    # conv or bilinear upsampling with align_corners; batch norm statistics randomized; eval output; then three
    # SGD steps in training mode on cross_entropy per pixel.
    mod = load("unet")
    torch.manual_seed(0)
    model = mod.UNet(3, 4, base=8, bilinear=bilinear)
    randomize_batch_norm(model)
    out = state("state", model)
    x = torch.randn(2, 3, 17, 19)
    y = torch.randint(0, 4, (2, 17, 19))
    out["input.0"], out["target.0"] = x, y
    model.eval()
    with torch.no_grad():
        out["output.0"] = model(x)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for i in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        out[f"loss.{i}"] = loss.detach().clone()
    out.update(state("trained", model))
    return out


def lambda_gan():
    # lambda_gan.py's Generator (batch norm, tanh out) and Discriminator (batch norm), statistics randomized: eval
    # outputs of both scores (score="prob", "logit"); the Generator without batch norm and with the clamping output; then three SGD steps
    # in training mode on binary cross-entropy of D(G(z)) over both models' parameters.
    mod = load("lambda_gan")
    torch.manual_seed(0)
    net_g, net_d = mod.Generator(), mod.Discriminator()
    randomize_batch_norm(net_g)
    randomize_batch_norm(net_d)
    plain = mod.Generator(bn=False, out="hard")
    out = {**state("state_g", net_g), **state("state_d", net_d), **state("state_plain", plain)}
    z = torch.randn(2, 8, 1, 1)
    out["input.0"] = z
    for m in (net_g, net_d, plain):
        m.eval()
    with torch.no_grad():
        fake = net_g(z)
        net_d.score = "logit"
        out["output.0"], out["output.2"] = fake, net_d(fake)
        net_d.score = "prob"
        out["output.1"] = net_d(fake)
        out["output.3"] = plain(z)
    net_g.train()
    net_d.train()
    opt = torch.optim.SGD(list(net_g.parameters()) + list(net_d.parameters()), lr=0.05)
    for i in range(3):
        opt.zero_grad()
        loss = F.binary_cross_entropy(net_d(net_g(z)), torch.ones(2))
        loss.backward()
        opt.step()
        out[f"loss.{i}"] = loss.detach().clone()
    out.update(state("trained_g", net_g))
    out.update(state("trained_d", net_d))
    return out


def cfg_gpt():
    # cfg_gpt.py's CharGPT (minGPT's manner): its training-script import stubbed, as kiln never reads it; eval
    # logits and loss with ignored targets, then three SGD steps on the loss (dropout 0).
    import types
    sys.modules.setdefault("charlm", types.ModuleType("charlm"))
    utils = types.ModuleType("charlm.utils")
    utils.set_seed = lambda seed: None
    sys.modules.setdefault("charlm.utils", utils)
    mod = load("cfg_gpt")
    torch.manual_seed(0)
    model = mod.CharGPT(mod.Node(width=16, heads=2, layers=2, drop=0.0, vocab=11, context=8))
    out = state("state", model)
    idx = torch.randint(0, 11, (2, 6))
    targets = torch.randint(0, 11, (2, 6))
    targets[0, 5] = -1
    out.update({"input.0": idx, "input.1": targets})
    model.eval()
    with torch.no_grad():
        out["output.0"], out["output.1"] = model(idx, targets)
    for i, loss in enumerate(sgd_on_own_loss(model, idx, targets)):
        out[f"loss.{i}"] = loss
    out.update(state("trained", model))
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    os.makedirs(dest, exist_ok=True)
    for name, make in (("gpt", gpt), ("vae", vae), ("dcgan", dcgan), ("word_lm", word_lm),
                       ("unet", unet), ("unet_bilinear", lambda: unet(bilinear=True)), ("lambda_gan", lambda_gan),
                       ("cfg_gpt", cfg_gpt)):
        save(os.path.join(dest, name + ".safetensors"), make())


if __name__ == "__main__":
    main()
