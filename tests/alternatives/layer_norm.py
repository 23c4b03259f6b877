"""Alternative correct LayerNorms: torch.var with correction=0 and rsqrt, F.layer_norm, var_mean."""

import torch
import torch.nn.functional as F
from torch import nn


class LayerNormVarRsqrt(nn.Module):
    """torch.var(correction=0) for the biased variance, multiplied by rsqrt(var + eps)."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return (
            centred * torch.rsqrt(x.var(-1, keepdim=True, correction=0) + self.eps) * self.gamma + self.beta
        )


class LayerNormFunctional(nn.Module):
    """PyTorch's fused F.layer_norm with the module's own gamma and beta."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model, self.epsilon = d_model, eps  # a different attribute name for eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x, (self.d_model,), self.gamma, self.beta, self.epsilon)


class LayerNormVarMean(nn.Module):
    """torch.var_mean(unbiased=False), then torch.addcmul for the affine part."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
        x_hat = (x - mean) / (var + self.eps).sqrt()
        return torch.addcmul(self.beta, self.gamma, x_hat)


ALTERNATIVES = {"LayerNorm": [LayerNormVarRsqrt, LayerNormFunctional, LayerNormVarMean]}
