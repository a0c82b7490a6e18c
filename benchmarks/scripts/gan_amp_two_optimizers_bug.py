"""A DCGAN trained with AMP: two optimizers, one GradScaler. The generator's step bypasses the scaler."""
import argparse
import os

import torch
import torch.nn as nn
import torch.optim as optim
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torchvision.utils as vutils

parser = argparse.ArgumentParser()
parser.add_argument("--dataroot", default="data/celeba")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--lr", type=float, default=2e-4)
parser.add_argument("--amp", action="store_true")
args = parser.parse_args()

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
nz, ngf, ndf, nc = 100, 64, 64, 3


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
        )

    def forward(self, input):
        return self.main(input).view(-1)


def main():
    dataset = dset.ImageFolder(root=args.dataroot, transform=transforms.Compose([
        transforms.Resize(64), transforms.CenterCrop(64), transforms.ToTensor(),
        transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=4)

    netG = Generator().to(device)
    netD = Discriminator().to(device)
    criterion = nn.BCEWithLogitsLoss()
    fixed_noise = torch.randn(64, nz, 1, 1, device=device)

    optimizerD = optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp)

    for epoch in range(args.epochs):
        for i, (real, _) in enumerate(dataloader):
            real = real.to(device)
            b_size = real.size(0)
            ones = torch.ones(b_size, device=device)
            zeros = torch.zeros(b_size, device=device)

            # (1) discriminator
            optimizerD.zero_grad(set_to_none=True)
            noise = torch.randn(b_size, nz, 1, 1, device=device)
            with torch.autocast(device_type=device.type, enabled=args.amp):
                fake = netG(noise)
                errD = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)
            scaler.scale(errD).backward()
            scaler.step(optimizerD)

            # (2) generator
            optimizerG.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, enabled=args.amp):
                errG = criterion(netD(fake), ones)
            scaler.scale(errG).backward()
            optimizerG.step()  # expect: DEV203
            scaler.update()

            if i % 50 == 0:
                print(f"[{epoch}/{args.epochs}][{i}/{len(dataloader)}] "
                      f"Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} scale {scaler.get_scale():.0f}")

        with torch.no_grad():
            fake = netG(fixed_noise).detach().cpu()
        vutils.save_image(fake, f"samples_{epoch:03d}.png", normalize=True)
        torch.save({"G": netG.state_dict(), "D": netD.state_dict(), "scaler": scaler.state_dict()},
                   os.path.join("checkpoints", f"dcgan_{epoch}.pt"))


if __name__ == "__main__":
    main()
