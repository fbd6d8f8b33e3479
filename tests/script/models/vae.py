"""The variational autoencoder of PyTorch's examples (vae/main.py), written the way that file is: fully
connected encoder and decoder, the reparameterization trick with torch.randn_like, and the loss as a
function of the file (binary cross-entropy summed plus the KL divergence)."""
import torch
from torch import nn
from torch.nn import functional as F


class VAE(nn.Module):
    def __init__(self, n_in=784, n_hidden=400, n_latent=20):
        super(VAE, self).__init__()
        self.n_in = n_in
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc21 = nn.Linear(n_hidden, n_latent)
        self.fc22 = nn.Linear(n_hidden, n_latent)
        self.fc3 = nn.Linear(n_latent, n_hidden)
        self.fc4 = nn.Linear(n_hidden, n_in)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, self.n_in))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar, n_in: int = 784):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, n_in), reduction='sum')

    # see Appendix B from VAE paper: Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD
