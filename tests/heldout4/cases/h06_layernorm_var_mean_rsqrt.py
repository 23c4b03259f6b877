# exercise: LayerNorm
# honest: torch.var_mean with correction=0, and rsqrt
# ruff: noqa
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-05):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.gamma + self.beta
