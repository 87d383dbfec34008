"""bench/plot.py draws a PNG from an `nconv bench --csv` table; model suites are summed per model."""
import os
import subprocess
import sys

from PIL import Image

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', 'bench', 'plot.py')
HEADER = 'name,desc,dir,layout,threads,algo,ms,gflops,peak_pct,onednn_ms,onednn_impl,ratio,plan_ms,plan_ratio,torch_ms\n'
ROWS = [
    'resnet:L1x2,mb8ic64ih56oc64oh56kh3ph1,fwd,nhwc,1,winograd,10,100,50,12,jit,1.2,9,1.3,40',
    'resnet:L2x1,mb8ic64ih56oc64oh56kh1ph0,fwd,nhwc,1,igemm,5,60,30,4,jit,0.8,5,0.8,10',
    'stem,mb8ic3ih56oc64oh56kh3ph1,bwd_w,nhwc,1,igemm,5,60,30,4,jit,0.8,5,0.8,',
    'stem,mb8ic3ih56oc64oh56kh3ph1,bwd_w,nchw,1,igemm,5,60,30,4,jit,0.8,5,0.8,',
]


def run(tmp_path, *args):
    table = tmp_path / 'table.csv'
    table.write_text(HEADER + '\n'.join(ROWS) + '\n')
    return subprocess.run([sys.executable, SCRIPT, str(table)] + list(args), capture_output=True, text=True)


def test_plot_draws_one_group_per_model_and_problem(tmp_path):
    out = tmp_path / 'p.png'
    r = run(tmp_path, '--out', str(out), '--title', 'test')
    assert r.returncode == 0, r.stderr
    assert '2 groups' in r.stdout  # resnet fwd (two layers summed), stem bwd_w (nhwc only)
    img = Image.open(out)
    assert img.format == 'PNG' and img.size[0] == 1200 and img.size[1] > 150


def test_plot_refuses_an_empty_selection(tmp_path):
    r = run(tmp_path, '--out', str(tmp_path / 'p.png'), '--threads', '2')
    assert r.returncode == 2 and 'no rows' in r.stderr
