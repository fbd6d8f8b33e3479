# Prints the reference trajectories of tests/test_nn.cpp (run with /usr/bin/python3, PyTorch 1.13).
import torch, math
torch.set_default_dtype(torch.float64)
def det(shape, seed):
    n = 1
    for s in shape: n *= s
    return torch.tensor([math.sin(i * 0.37 + seed) * 0.5 for i in range(n)]).reshape(shape)
for optname in ["sgd", "adam", "adamw"]:
    m = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    with torch.no_grad():
        m[0].weight.copy_(det((5,4),1)); m[0].bias.copy_(det((5,),2)); m[2].weight.copy_(det((3,5),3)); m[2].bias.copy_(det((3,),4))
    x = det((6,4),5); y = torch.tensor([0,2,1,1,0,2])
    if optname=="sgd": opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    elif optname=="adam": opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=0.01)
    else: opt = torch.optim.AdamW(m.parameters(), lr=0.01)
    losses=[]
    for i in range(5):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); losses.append(loss.item())
    print(optname, ["%.12f"%l for l in losses], "%.12f"%m[2].bias[1].item())
