"""The networks of the "Dive into Deep Learning" book's modern-CNN chapters as its MXNet edition
writes them (imperative ``nn.Sequential`` and ``nn.Block`` with ``forward``, ``nd.concat``,
``nd.relu``), for ``_worker.py``'s ``book_*`` cases: AlexNet on 1x224x224 images, GoogLeNet and
ResNet-18 on 1x96x96, ten classes. ``gluon_net`` builds one for Gluon (ours or MXNet 1.9.1, the
same code); ``torch_net`` builds the same layers as a PyTorch user writes them."""

# name -> (input side, the book's learning rate)
BOOK_NETS = {"alexnet": (224, 0.01), "googlenet": (96, 0.1), "resnet": (96, 0.05)}

# GoogLeNet's Inception blocks: (c1, (c2a, c2b), (c3a, c3b), c4), None for a 3x3/2 max pooling.
_INCEPTIONS = [(64, (96, 128), (16, 32), 32), (128, (128, 192), (32, 96), 64), None,
               (192, (96, 208), (16, 48), 64), (160, (112, 224), (24, 64), 64),
               (128, (128, 256), (24, 64), 64), (112, (144, 288), (32, 64), 64),
               (256, (160, 320), (32, 128), 128), None,
               (256, (160, 320), (32, 128), 128), (384, (192, 384), (48, 128), 128)]
_RESNET_STAGES = [(64, 2, True), (128, 2, False), (256, 2, False), (512, 2, False)]


def gluon_net(name, gluon, nd):
    nn = gluon.nn
    net = nn.Sequential()
    if name == "alexnet":
        net.add(nn.Conv2D(96, kernel_size=11, strides=4, activation="relu"),
                nn.MaxPool2D(pool_size=3, strides=2),
                nn.Conv2D(256, kernel_size=5, padding=2, activation="relu"),
                nn.MaxPool2D(pool_size=3, strides=2),
                nn.Conv2D(384, kernel_size=3, padding=1, activation="relu"),
                nn.Conv2D(384, kernel_size=3, padding=1, activation="relu"),
                nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"),
                nn.MaxPool2D(pool_size=3, strides=2),
                nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
                nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
                nn.Dense(10))
        return net
    if name == "googlenet":
        class Inception(nn.Block):
            def __init__(self, c1, c2, c3, c4, **kwargs):
                super().__init__(**kwargs)
                self.p1_1 = nn.Conv2D(c1, kernel_size=1, activation="relu")
                self.p2_1 = nn.Conv2D(c2[0], kernel_size=1, activation="relu")
                self.p2_2 = nn.Conv2D(c2[1], kernel_size=3, padding=1, activation="relu")
                self.p3_1 = nn.Conv2D(c3[0], kernel_size=1, activation="relu")
                self.p3_2 = nn.Conv2D(c3[1], kernel_size=5, padding=2, activation="relu")
                self.p4_1 = nn.MaxPool2D(pool_size=3, strides=1, padding=1)
                self.p4_2 = nn.Conv2D(c4, kernel_size=1, activation="relu")

            def forward(self, x):
                p1 = self.p1_1(x)
                p2 = self.p2_2(self.p2_1(x))
                p3 = self.p3_2(self.p3_1(x))
                p4 = self.p4_2(self.p4_1(x))
                return nd.concat(p1, p2, p3, p4, dim=1)

        net.add(nn.Conv2D(64, kernel_size=7, strides=2, padding=3, activation="relu"),
                nn.MaxPool2D(pool_size=3, strides=2, padding=1),
                nn.Conv2D(64, kernel_size=1, activation="relu"),
                nn.Conv2D(192, kernel_size=3, padding=1, activation="relu"),
                nn.MaxPool2D(pool_size=3, strides=2, padding=1))
        for spec in _INCEPTIONS:
            net.add(Inception(*spec) if spec else nn.MaxPool2D(pool_size=3, strides=2, padding=1))
        net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
        return net

    class Residual(nn.Block):
        def __init__(self, num_channels, use_1x1conv=False, strides=1, **kwargs):
            super().__init__(**kwargs)
            self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1, strides=strides)
            self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
            self.conv3 = nn.Conv2D(num_channels, kernel_size=1, strides=strides) \
                if use_1x1conv else None
            self.bn1 = nn.BatchNorm()
            self.bn2 = nn.BatchNorm()

        def forward(self, X):
            Y = nd.relu(self.bn1(self.conv1(X)))
            Y = self.bn2(self.conv2(Y))
            if self.conv3:
                X = self.conv3(X)
            return nd.relu(Y + X)

    net.add(nn.Conv2D(64, kernel_size=7, strides=2, padding=3), nn.BatchNorm(),
            nn.Activation("relu"), nn.MaxPool2D(pool_size=3, strides=2, padding=1))
    for channels, blocks, first in _RESNET_STAGES:
        for i in range(blocks):
            if i == 0 and not first:
                net.add(Residual(channels, use_1x1conv=True, strides=2))
            else:
                net.add(Residual(channels))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
    return net


def torch_net(name, torch):
    nn = torch.nn
    if name == "alexnet":
        return nn.Sequential(
            nn.Conv2d(1, 96, kernel_size=11, stride=4), nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(96, 256, kernel_size=5, padding=2), nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(256, 384, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 384, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2), nn.Flatten(),
            nn.Linear(6400, 4096), nn.ReLU(), nn.Dropout(p=0.5),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(p=0.5),
            nn.Linear(4096, 10))
    if name == "googlenet":
        class Inception(nn.Module):
            def __init__(self, cin, c1, c2, c3, c4):
                super().__init__()
                self.p1_1 = nn.Conv2d(cin, c1, kernel_size=1)
                self.p2_1 = nn.Conv2d(cin, c2[0], kernel_size=1)
                self.p2_2 = nn.Conv2d(c2[0], c2[1], kernel_size=3, padding=1)
                self.p3_1 = nn.Conv2d(cin, c3[0], kernel_size=1)
                self.p3_2 = nn.Conv2d(c3[0], c3[1], kernel_size=5, padding=2)
                self.p4_1 = nn.MaxPool2d(kernel_size=3, stride=1, padding=1)
                self.p4_2 = nn.Conv2d(cin, c4, kernel_size=1)

            def forward(self, x):
                relu = torch.nn.functional.relu
                p1 = relu(self.p1_1(x))
                p2 = relu(self.p2_2(relu(self.p2_1(x))))
                p3 = relu(self.p3_2(relu(self.p3_1(x))))
                p4 = relu(self.p4_2(self.p4_1(x)))
                return torch.cat((p1, p2, p3, p4), dim=1)

        layers = [nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3), nn.ReLU(),
                  nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
                  nn.Conv2d(64, 64, kernel_size=1), nn.ReLU(),
                  nn.Conv2d(64, 192, kernel_size=3, padding=1), nn.ReLU(),
                  nn.MaxPool2d(kernel_size=3, stride=2, padding=1)]
        cin = 192
        for spec in _INCEPTIONS:
            if spec is None:
                layers.append(nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
                continue
            layers.append(Inception(cin, *spec))
            cin = spec[0] + spec[1][1] + spec[2][1] + spec[3]
        layers += [nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(cin, 10)]
        return nn.Sequential(*layers)

    class Residual(nn.Module):
        def __init__(self, cin, cout, use_1x1conv=False, strides=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, kernel_size=3, padding=1, stride=strides)
            self.conv2 = nn.Conv2d(cout, cout, kernel_size=3, padding=1)
            self.conv3 = nn.Conv2d(cin, cout, kernel_size=1, stride=strides) \
                if use_1x1conv else None
            self.bn1 = nn.BatchNorm2d(cout)
            self.bn2 = nn.BatchNorm2d(cout)

        def forward(self, X):
            relu = torch.nn.functional.relu
            Y = relu(self.bn1(self.conv1(X)))
            Y = self.bn2(self.conv2(Y))
            if self.conv3:
                X = self.conv3(X)
            return relu(Y + X)

    layers = [nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3), nn.BatchNorm2d(64),
              nn.ReLU(), nn.MaxPool2d(kernel_size=3, stride=2, padding=1)]
    cin = 64
    for channels, blocks, first in _RESNET_STAGES:
        for i in range(blocks):
            if i == 0 and not first:
                layers.append(Residual(cin, channels, use_1x1conv=True, strides=2))
            else:
                layers.append(Residual(cin, channels))
            cin = channels
    layers += [nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers)
