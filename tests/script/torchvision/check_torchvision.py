"""torchvision's model files as Debian's python3-torchvision installs them, read by kiln as published.

For each of the 18 models of issue 28: PyTorch builds the class (or calls the builder) with the arguments torchvision's builder
passes (few classes, under a fixed seed, batch norm statistics randomized), saves its state_dict and its
eval output on a small input; kiln builds the same class from the installed file (script_module_tool),
loads the state_dict, and its eval output on the interpreter and through compile() must equal PyTorch's
within 1e-4, or be no further from PyTorch's float64 output than twice PyTorch's own float32 is. A model kiln cannot build yet must fail with the error its entry names (the layer or op it
lacks), so a regression and a fix both show. `kiln check` builds ResNet from the command line too. Run
with /usr/bin/python3 (PyTorch 1.13):
    check_torchvision.py SCRIPT_MODULE_TOOL KILN [MODEL...]
"""
import copy
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torchvision.models as tvm
from torchvision.models import convnext, efficientnet, mobilenetv3, regnet, resnet, vgg

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(tvm.__file__)

spec = importlib.util.spec_from_file_location("make_fixtures", os.path.join(HERE, "..", "models", "make_fixtures.py"))
fixtures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fixtures)

def vit(*args, **kwargs):
    # torchvision zeroes the classifier, which would make every output 0 whatever came before it
    m = tvm.VisionTransformer(*args, **kwargs)
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    return m


# name: (file, class, kiln arguments, PyTorch's constructor, input size, None or the error kiln must give)
CASES = {
    "alexnet": ("alexnet", "AlexNet", ["num_classes=10"], lambda: tvm.AlexNet(num_classes=10), 64, None),
    "vgg11": ("vgg", "VGG", ["make_layers(cfgs['A'], False)", "num_classes=10"],
              lambda: tvm.VGG(vgg.make_layers(vgg.cfgs["A"], False), num_classes=10), 32, None),
    # torchvision's builder, as users call it: @register_model and @handle_legacy_interface pass it through, and
    # ResNet18_Weights.verify(None) runs on the weight enum (WeightsEnum, torchvision's StrEnum of enum.Enum)
    "resnet18": ("resnet", "resnet18", ["weights=None", "num_classes=10"],
                 lambda: tvm.resnet18(weights=None, num_classes=10), 64, None),
    "resnet50": ("resnet", "ResNet", ["Bottleneck", "[3, 4, 6, 3]", "num_classes=10"],
                 lambda: tvm.ResNet(resnet.Bottleneck, [3, 4, 6, 3], num_classes=10), 64, None),
    "squeezenet1_0": ("squeezenet", "SqueezeNet", ["'1_0'", "num_classes=10"], lambda: tvm.SqueezeNet("1_0", num_classes=10),
                      64, None),
    # _DenseBlock derives from nn.ModuleDict; _DenseLayer.forward has @torch.jit._overload_method overloads
    # (a Tensor or a List[Tensor]) and decides isinstance(input, Tensor) while lowering
    "densenet121": ("densenet", "DenseNet", ["32", "(6, 12, 24, 16)", "64", "num_classes=10"],
                    lambda: tvm.DenseNet(32, (6, 12, 24, 16), 64, num_classes=10), 64, None),
    "mobilenet_v2": ("mobilenetv2", "MobileNetV2", ["num_classes=10"], lambda: tvm.MobileNetV2(num_classes=10), 64, None),
    "mobilenet_v3_small": ("mobilenetv3", "MobileNetV3", ["_mobilenet_v3_conf('mobilenet_v3_small')[0]",
                                                          "_mobilenet_v3_conf('mobilenet_v3_small')[1]", "num_classes=10"],
                           lambda: tvm.MobileNetV3(*mobilenetv3._mobilenet_v3_conf("mobilenet_v3_small"), num_classes=10),
                           64, None),
    "mnasnet0_5": ("mnasnet", "MNASNet", ["0.5", "num_classes=10"], lambda: tvm.MNASNet(0.5, num_classes=10), 64, None),
    "shufflenet_v2_x0_5": ("shufflenetv2", "ShuffleNetV2", ["[4, 8, 4]", "[24, 48, 96, 192, 1024]", "num_classes=10"],
                           lambda: tvm.ShuffleNetV2([4, 8, 4], [24, 48, 96, 192, 1024], num_classes=10), 64, None),
    # forward returns the namedtuple GoogLeNetOutputs (the scripted branch of torch.jit.is_scripting()): its
    # logits are PyTorch's eager eval output
    # through the builders: aux_logits=True (the aux classifiers run in training mode only; _forward returns them as
    # Optional[Tensor]), init_weights=None (warnings.warn(..., FutureWarning)), inception's `self.fc.stddev = 0.001`
    "googlenet": ("googlenet", "googlenet", ["weights=None", "num_classes=10"],
                  lambda: tvm.googlenet(weights=None, num_classes=10), 64, None),
    "inception_v3": ("inception", "inception_v3", ["weights=None", "num_classes=10"],
                     lambda: tvm.inception_v3(weights=None, num_classes=10), 75, None),
    # torchvision's StochasticDepth (ops/stochastic_depth.py): building lowers forward in training mode, where
    # stochastic_depth() draws its noise with torch.empty(size, dtype=input.dtype, device=input.device), the
    # dtype read when the graph runs, then bernoulli_(p) and div_; in eval mode it returns the input
    "efficientnet_b0": ("efficientnet", "EfficientNet",
                        ["_efficientnet_conf('efficientnet_b0', width_mult=1.0, depth_mult=1.0)[0]", "0.2", "num_classes=10"],
                        lambda: tvm.EfficientNet(efficientnet._efficientnet_conf("efficientnet_b0", width_mult=1.0,
                                                                                 depth_mult=1.0)[0], 0.2, num_classes=10),
                        64, None),
    # BlockParams.from_init_params computes the widths with tensor arithmetic in Python (run by __init__'s
    # evaluator); SimpleStemIN derives from Conv2dNormActivation of ops/misc.py
    "regnet_y_400mf": ("regnet", "RegNet", ["BlockParams.from_init_params(depth=16, w_0=48, w_a=27.89, w_m=2.09, "
                                            "group_width=8, se_ratio=0.25)", "num_classes=10"],
                       lambda: tvm.RegNet(regnet.BlockParams.from_init_params(depth=16, w_0=48, w_a=27.89, w_m=2.09,
                                                                              group_width=8, se_ratio=0.25), num_classes=10),
                       64, None),
    "convnext_tiny": ("convnext", "ConvNeXt", ["[CNBlockConfig(96, 192, 3), CNBlockConfig(192, 384, 3), "
                                               "CNBlockConfig(384, 768, 9), CNBlockConfig(768, None, 3)]", "0.1",
                                               "num_classes=10"],
                      lambda: tvm.ConvNeXt([convnext.CNBlockConfig(96, 192, 3), convnext.CNBlockConfig(192, 384, 3),
                                            convnext.CNBlockConfig(384, 768, 9), convnext.CNBlockConfig(768, None, 3)],
                                           0.1, num_classes=10), 64, None),
    # vit_b_16's layers on a 64x64 image (image_size is an argument): nn.MultiheadAttention, MLPBlock deriving
    # torchvision.ops.misc.MLP (a class of another file), torch._assert with f-string messages in forward
    "vit_b_16": ("vision_transformer", "VisionTransformer", ["64", "16", "12", "12", "768", "3072", "num_classes=10"],
                 lambda: vit(64, 16, 12, 12, 768, 3072, num_classes=10), 64, None),
    # __init__ builds (torch.meshgrid, indexing, writes through views); shifted_window_attention() pads with F.pad
    # and rolls by amounts computed from the input's size when the graph runs, changes a copy of shift_size in a
    # branch, and builds its attention mask with x.new_zeros and slices whose bounds come from tuples with None
    "swin_t": ("swin_transformer", "SwinTransformer", ["[4, 4]", "96", "[2, 2, 6, 2]", "[3, 6, 12, 24]", "[7, 7]", "0.2",
                                                       "num_classes=10"],
               lambda: tvm.SwinTransformer([4, 4], 96, [2, 2, 6, 2], [3, 6, 12, 24], [7, 7], 0.2, num_classes=10), 64, None),
    # maxvit_t's layers on a 64x64 image with partition_size 2 (the grids, 16 to 2, must divide by it): np.linspace in
    # __init__, ModuleList +=, nn.parameter.Parameter, torch.swapaxes, a "...".format() assert message
    "maxvit_t": ("maxvit", "MaxVit", ["(64, 64)", "64", "2", "[64, 128, 256, 512]", "[2, 2, 5, 2]", "32", "0.2",
                                      "num_classes=10"],
                 lambda: tvm.MaxVit((64, 64), 64, 2, [64, 128, 256, 512], [2, 2, 5, 2], 32, 0.2, num_classes=10), 64, None),
}


def run(tool, name, tmp):
    file, cls, args, make, size, expected = CASES[name]
    path = os.path.join(MODELS, file + ".py")
    weights, x_path = os.path.join(tmp, name + ".safetensors"), os.path.join(tmp, name + "_x.npy")
    y_interp, y_compiled = os.path.join(tmp, name + "_interp.npy"), os.path.join(tmp, name + "_compiled.npy")
    want = None
    if expected is None:
        torch.manual_seed(0)
        model = make()
        fixtures.randomize_batch_norm(model)
        model.eval()
        x = torch.randn(1, 3, size, size)
        with torch.no_grad():
            want = model(x).numpy()
            exact = copy.deepcopy(model).double()(x.double()).numpy()
        fixtures.save(weights, model.state_dict())
        np.save(x_path, x.numpy())
    r = subprocess.run([tool, path, cls, weights, x_path, y_interp, y_compiled] + args, capture_output=True, text=True)
    if expected is not None:
        if r.returncode == 0:
            return f"{name}: expected to fail with /{expected}/, but it built (a fix? update its entry)"
        if r.returncode != 2 or not re.search(expected, r.stderr):
            return f"{name}: expected an error matching /{expected}/, got (status {r.returncode}):\n{r.stderr}"
        print(f"{name}: fails as expected: {r.stderr.strip().splitlines()[0]}")
        return None
    if r.returncode != 0:
        return f"{name}: kiln failed (status {r.returncode}):\n{r.stderr}"
    errs = []
    for what, p in (("interpreter", y_interp), ("compile()", y_compiled)):
        got = np.load(p)
        if got.shape != want.shape:
            return f"{name}: {what} differs from PyTorch (shape {got.shape} vs {want.shape})"
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            # a float32 sum in another order moves an output as far as PyTorch's float32 is from float64's
            # (inception_v3's outputs reach 2e9 here): allowed twice that distance from the float64 result
            torch_err = np.abs(want - exact).max()
            if np.abs(got - exact).max() > 2 * torch_err:
                return (f"{name}: {what} differs from PyTorch (max abs error {np.abs(got - want).max()}; "
                        f"PyTorch's float32 is {torch_err} from its float64)")
        errs.append(np.abs(got - want).max())
    print(f"{name}: equal to PyTorch on the interpreter and through compile() (max abs error {max(errs):.2g}, "
          f"outputs up to {np.abs(want).max():.2g})")
    return None


def check_cli(kiln):
    resnet_py = os.path.join(MODELS, "resnet.py")
    r = subprocess.run([kiln, "check", resnet_py, "ResNet", "BasicBlock", "[2,2,2,2]", "num_classes=10"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"kiln check resnet.py ResNet BasicBlock [2,2,2,2] failed:\n{r.stderr}"
    r = subprocess.run([kiln, "check", resnet_py, "ResNet", "BasicBlok", "[2,2,2,2]"], capture_output=True, text=True)
    if r.returncode == 0 or "undefined name 'BasicBlok'; did you mean BasicBlock?" not in r.stderr:
        return f"kiln check with a misspelt class: expected an undefined name error, got (status {r.returncode}):\n{r.stderr}"
    print("kiln check builds ResNet(BasicBlock, [2,2,2,2]) from the command line")
    return None


def main():
    tool, kiln = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or list(CASES)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)  # torchvision's note on init_weights=None
    warnings.filterwarnings("ignore", message="torch.meshgrid")  # maxvit's meshgrid without indexing=
    failures = [m for m in [check_cli(kiln)] if m]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            msg = run(tool, name, tmp)
            if msg:
                failures.append(msg)
    built = sum(1 for n in names if CASES[n][5] is None)
    print(f"kiln builds {built} of {len(names)}")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
