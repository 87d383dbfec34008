"""Fashion-MNIST training in Python (examples/fashion_mnist.py): nconv.torch against torch, step by step.
Skipped without Debian's dataset-fashion-mnist."""
import os
import subprocess
import sys

import pytest

DATA = '/usr/share/datasets/fashion-mnist'
SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'examples', 'fashion_mnist.py')


@pytest.mark.skipif(not os.path.exists(os.path.join(DATA, 'train-images-idx3-ubyte.gz')),
                    reason='no Fashion-MNIST (Debian: dataset-fashion-mnist)')
def test_losses_agree_with_torch_step_by_step():
    r = subprocess.run([sys.executable, SCRIPT, '--compare', '300', '--threads', '2'], capture_output=True,
                       text=True)
    print(r.stdout, r.stderr)
    assert r.returncode == 0
    assert r.stdout.count(': ok') == 2
