"""torch.nn.functional's losses with their options: class weights, ignore_index, label smoothing,
pos_weight, the reductions (kiln runs eager/composite_losses.h). Class-probability targets are eager-only
(tests/test_losses.cpp): a graph does not know a target's dtype when it is built."""
import torch
import torch.nn.functional as F
from torch import Tensor
from typing import Tuple


def classes(x: Tensor, t: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    w = torch.softmax(x[0], 0) + 0.5
    u = t.clone()
    u[1] = 2
    t = t.clone()
    t[0] = -100
    return (F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="sum"), F.cross_entropy(x, t, weight=w),
            F.cross_entropy(x, u, reduction="none", ignore_index=2), F.nll_loss(F.log_softmax(x, 1), t, weight=w))


def smoothing(x: Tensor, t: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    w = torch.softmax(x[1], 0) + 0.25
    return (F.cross_entropy(x, t, label_smoothing=0.1), F.cross_entropy(x, t, weight=w, label_smoothing=0.2),
            F.cross_entropy(x, t, weight=w, ignore_index=1, label_smoothing=0.3, reduction="sum"),
            F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.15, reduction="none"))


def images(x: Tensor, t: Tensor) -> Tuple[Tensor, Tensor]:
    w = torch.softmax(x[0, :, 0, 0], 0) + 0.5
    return F.cross_entropy(x, t), F.cross_entropy(x, t, weight=w, label_smoothing=0.1)


def regression(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    return (F.mse_loss(x, y), F.l1_loss(x, y, reduction="sum"), F.smooth_l1_loss(x, y), F.smooth_l1_loss(x, y, beta=0.5),
            F.huber_loss(x, y, delta=0.7), F.huber_loss(x, y, reduction="none"), F.smooth_l1_loss(x, y, beta=0.0))


def binary(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    p = torch.sigmoid(x)
    t = torch.sigmoid(y * 3.0)
    w = torch.sigmoid(y) + 0.5
    pw = torch.softmax(y[0], 0) * 4.0
    return (F.binary_cross_entropy(p, t), F.binary_cross_entropy(p, t, weight=w, reduction="sum"),
            F.binary_cross_entropy_with_logits(x * 20.0, t), F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw),
            F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="none"))


def divergence(x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    lp = F.log_softmax(x, 1)
    q = torch.softmax(y, 1)
    q0 = torch.where(q > 0.3, q, torch.zeros_like(q))  # zeros in the target add nothing
    return (F.kl_div(lp, q, reduction="batchmean"), F.kl_div(lp, q0, reduction="sum"),
            F.kl_div(lp, F.log_softmax(y, 1), reduction="batchmean", log_target=True), F.kl_div(lp, q, reduction="none"))


# CASE: classes randn(6,4) randint(0,4,6)
# CASE: smoothing randn(5,3) randint(0,3,5)
# CASE: images randn(2,3,4,4) randint(0,3,2,4,4)
# CASE: regression randn(3,4) randn(3,4)
# CASE: binary randn(3,4) randn(3,4)
# CASE: divergence randn(4,5) randn(4,5)
