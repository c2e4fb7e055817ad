"""Flags in, one validated config out; bad input is one line and exit code 2."""

import os
import subprocess
import sys

import pytest

from hpcnn.cli import main, parse_config
from hpcnn.config import ConfigError
from unit_tests.helpers import SHIPPED_BASELINES


def test_guide_flag_syntax_parses():
    c = parse_config(["--model=resnet50", "--batch_size=16", "--num_gpus=2", "--device=cpu",
                      "--variable_update=replicated", "--use_nccl=False", "--nodistortions", "--forward_only",
                      "--num_batches", "20", "--local_parameter_device=cpu", "--optimizer=momentum"])
    assert (c.model, c.batch_size, c.num_gpus, c.images_per_step) == ("resnet50", 16, 2, 32)
    assert c.variable_update == "replicated" and c.use_nccl is False and c.resolved_use_nccl is False
    assert c.distortions is False and c.forward_only is True and c.num_batches == 20
    assert c.resolved_data_format == "NHWC"  # the CPU default


def test_defaults_resolve_per_device():
    c = parse_config([])
    assert (c.model, c.precision, c.resolved_parameter_device, c.resolved_use_nccl) == ("trivial", "fp32", "cpu",
                                                                                         False)
    g = parse_config(["--device=gpu"])
    assert (g.resolved_data_format, g.resolved_use_nccl, g.resolved_parameter_device) == ("NCHW", True, "gpu")


def test_use_fp16_means_bfloat16_on_cpu_and_float16_on_gpu():
    assert parse_config(["--use_fp16"]).precision == "bf16"
    assert parse_config(["--use_fp16", "--device=gpu"]).precision == "fp16"
    with pytest.raises(ConfigError, match="contradicts"):
        parse_config(["--use_fp16", "--precision=fp32"])


def test_onednn_flag_and_tf_cnn_benchmarks_mkl_alias():
    assert parse_config([]).onednn == "auto"
    assert parse_config(["--onednn=off"]).onednn == "off"
    assert parse_config(["--mkl"]).onednn == "on" and parse_config(["--nomkl"]).onednn == "off"
    assert parse_config(["--mkl", "--onednn=on"]).onednn == "on"


def test_parsing_flags_imports_no_tensorflow():
    code = ("import sys; from hpcnn.cli import parse_flags; v = parse_flags(['--model=resnet50', '--mkl']); "
            "assert v['onednn'] == 'on', v; assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_learning_rate_defaults_to_the_models():
    assert parse_config(["--model=resnet50"]).learning_rate == 0.1
    assert parse_config(["--model=resnet50", "--init_learning_rate=0.3"]).learning_rate == 0.3


W2 = "--worker_hosts=127.0.0.1:2223,127.0.0.1:2224"
PS1 = "--ps_hosts=127.0.0.1:2222"
BAD = [
    (["--model=resnet51"], "--model='resnet51' is not a known model; known models: alexnet"),
    (["--batch_size=0"], "--batch_size=0 must be a positive integer"),
    (["--batch_size=abc"], "batch_size"),
    (["--num_gpus=-1"], "--num_gpus=-1 must be a positive integer"),
    (["--data_format=NCWH"], "--data_format='NCWH' is not allowed; allowed: NHWC, NCHW"),
    (["--variable_update=allreduce"], "allowed: parameter_server, replicated, independent"),
    (["--optimizer=lamb"], "allowed: sgd, momentum, rmsprop, adam"),
    (["--device=tpu"], "--device='tpu' is not allowed; allowed: cpu, gpu"),
    (["--use_nccl=True"], "--use_nccl=True needs --device=gpu"),
    (["--precision=fp16"], "not usable on the CPU"),
    (["--local_parameter_device=gpu"], "needs --device=gpu"),
    (["--staged_vars", "--variable_update=replicated"], "--staged_vars needs --variable_update=parameter_server"),
    (["--data_dir=/nonexistent/hpcnn"], "--data_dir='/nonexistent/hpcnn' is not a directory"),
    (["--data_name=cifar10"], "--data_name='cifar10' is not implemented yet; allowed now: imagenet"),
    (["--variable_update=distributed_replicated"], "runs across processes; it needs --worker_hosts"),
    (["--bogus=1"], "Unknown command line flag 'bogus'"),
    (["--onednn=maybe"], "--onednn='maybe' is not allowed; allowed: auto, on, off"),
    (["--mkl", "--onednn=off"], "--mkl contradicts --onednn=off; give one of them"),
    (["--nomkl", "--onednn=on"], "--nomkl contradicts --onednn=on; give one of them"),
    (["stray"], "unexpected argument 'stray'"),
    # the cluster flags
    ([PS1, W2], "--ps_hosts/--worker_hosts need --job_name; allowed: ps, worker"),
    ([PS1, W2, "--job_name=chief"], "--job_name='chief' is not allowed; allowed: ps, worker"),
    ([PS1, "--worker_hosts=127.0.0.1", "--job_name=worker"],
     "--worker_hosts entry '127.0.0.1' is not host:port with a port in 1..65535"),
    ([PS1, "--worker_hosts=127.0.0.1:99999", "--job_name=worker"], "entry '127.0.0.1:99999' is not host:port"),
    (["--ps_hosts=:2222", W2, "--job_name=ps"], "--ps_hosts entry ':2222' is not host:port"),
    (["--ps_hosts=127.0.0.1:2223", W2, "--job_name=ps"], "'127.0.0.1:2223' appears more than once"),
    ([PS1, W2, "--job_name=worker", "--task_index=2"],
     "--task_index=2 is out of range for --job_name=worker with 2 task(s); allowed: 0..1"),
    ([PS1, W2, "--job_name=ps", "--task_index=1"], "--task_index=1 is out of range for --job_name=ps with 1 task"),
    ([PS1, W2, "--job_name=worker", "--task_index=-1"], "--task_index=-1 is out of range"),
    ([PS1, "--job_name=ps"], "--worker_hosts is empty"),
    ([W2, "--job_name=worker"],
     "--variable_update=parameter_server keeps master variables on ps tasks; give --ps_hosts"),
    ([PS1, W2, "--job_name=worker", "--variable_update=collective_all_reduce"], "leave --ps_hosts empty"),
    ([PS1, W2, "--job_name=worker", "--variable_update=replicated"],
     "--variable_update='replicated' is not allowed; allowed: parameter_server, distributed_replicated, "
     "collective_all_reduce"),
    (["--variable_update=collective_all_reduce"], "runs across processes; it needs --worker_hosts"),
    ([PS1, W2, "--job_name=worker", "--cluster_timeout_secs=0"], "--cluster_timeout_secs=0.0 must be > 0"),
    ([PS1, W2, "--job_name=worker", "--staged_vars"], "--staged_vars is not supported in a distributed run"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcnn: error: ") and err.count("\n") == 1
    assert message in err


def test_more_gpus_than_exist_is_a_usage_error(capsys):
    assert main(["--device=gpu", "--num_gpus=64"]) == 2
    assert "--num_gpus=64 but this machine has" in capsys.readouterr().err


def test_console_script_prints_one_clean_line_and_no_traceback():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    p = subprocess.run([sys.executable, "-m", "hpcnn.cli", "--model=nope"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [p.stderr.strip()] and "Traceback" not in p.stderr
    assert p.stderr.startswith("hpcnn: error: --model='nope'")


PAIRED_RECORD = os.path.join(SHIPPED_BASELINES, "quality", "three-step-rounds",
                             "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.paired.json")  # not stored
STORED_RECORD = os.path.join(SHIPPED_BASELINES, "quality", "cpu-amd-epyc-f25m1-avx2-onednn-2c-tf2.21.stored.json")


def test_a_perf_table_piped_into_a_reader_that_stops_early_ends_without_a_traceback():
    read, write = os.pipe()
    os.close(read)  # the reader (``| head``) has gone before the first line
    p = subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "gate-quality", f"--show={PAIRED_RECORD}"],
                       stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert p.returncode == 141 and "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr


@pytest.mark.parametrize("argv,line", [
    (["hpcnn.data_tool", "shred"], "hpcnn-data: error: argument command: invalid choice: 'shred'"),
    (["hpcnn.data_tool", "check"], "hpcnn-data: error: the following arguments are required: "),
    (["hpcnn.data_tool", "make-synthetic", "--out=x", "--width=0"], "hpcnn-data: error: --width=0 must be at least 1"),
    (["hpcnn.data_tool", "make-synthetic", "--out=x", "--seed=-1"], "hpcnn-data: error: --seed=-1 must be at least 0"),
    (["hpcnn.data_tool", "make-imagenet", "--from=x", "--out=x", "--shards=0"],
     "hpcnn-data: error: --shards=0 must be at least 1"),
    (["hpcnn.perf.cli", "compare", "--max-rounds=x"],
     "hpcnn-perf: error: argument --max-rounds: invalid int value: 'x'"),
    (["hpcnn.perf.cli", "compare", "--baseline=HEAD", "--plant-slowdown=nan"],
     "hpcnn-perf: error: argument --plant-slowdown: nan is not a fraction of a step, at least 0"),
    (["hpcnn.perf.cli", "bisect", "--good=HEAD~1", "--restart-every=-1"],
     "hpcnn-perf: error: argument --restart-every: -1 is not a whole number of round pairs (0: never restart)"),
    (["hpcnn.perf.cli", "gate-quality", "--slowdowns=0.05,abc"],
     "hpcnn-perf: error: argument --slowdowns: 0.05,abc is not a comma-separated list of fractions, each 0 <= f < 1"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=stored", "--baselines-dir=baselines", "--runs=0"],
     "hpcnn-perf: error: argument --runs: 0 is not a whole number of runs, at least 1"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=simulate", "--draws=0"],
     "hpcnn-perf: error: argument --draws: 0 is not a whole number of matrices, at least 1"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=simulate", "--combinations=-1"],
     "hpcnn-perf: error: argument --combinations: -1 is not a whole number of combinations, at least 1"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=stored", "--pause-seconds=inf"],
     "hpcnn-perf: error: argument --pause-seconds: inf is not a number of seconds, at least 0"),
    (["hpcnn.perf.cli", "gate-quality", "--rejudge=record.json"],
     "hpcnn-perf: error: --rejudge judges a --mode=stored record again; --mode=paired has none"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=stored", "--as-machine=vm-2"],
     "hpcnn-perf: error: --as-machine='vm-2' names the machine of a --rejudge record's sessions; allowed: a "
     "non-empty id, with --mode=stored --rejudge=RECORD"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=stored", "--rejudge=r.json", "--as-machine= "],
     "hpcnn-perf: error: --as-machine=' ' names the machine"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=stored", "--rejudge=/nonexistent/record.json"],
     "hpcnn-perf: error: --rejudge=/nonexistent/record.json: not a readable JSON record ([Errno 2]"),
    (["hpcnn.perf.cli", "gate-quality", "--mode=stored", f"--rejudge={PAIRED_RECORD}"],
     f"hpcnn-perf: error: --rejudge={PAIRED_RECORD}: not a --mode=stored record of hpcnn-perf gate-quality "),
    (["hpcnn.perf.cli", "gate-quality", "--run=2"],
     "hpcnn-perf: error: --run=2 picks a run of a --show record; allowed: with --mode=paired --show=RECORD"),
    (["hpcnn.perf.cli", "gate-quality", f"--show={PAIRED_RECORD}", "--run=3"],
     f"hpcnn-perf: error: --run=3: {PAIRED_RECORD} holds runs 1-2; allowed: 1 to 2"),
    (["hpcnn.perf.cli", "gate-quality", f"--show={PAIRED_RECORD}", "--resume", "--json=x.json"],
     f"hpcnn-perf: error: --show={PAIRED_RECORD} prints a --mode=paired record and measures nothing; allowed: "
     "--mode=paired --show=RECORD [--run=N], without --json or --resume"),
    (["hpcnn.perf.cli", "gate-quality", "--show=/nonexistent/record.json"],
     "hpcnn-perf: error: --show=/nonexistent/record.json: not a readable JSON record ([Errno 2]"),
    (["hpcnn.perf.cli", "gate-quality", f"--show={STORED_RECORD}"],
     f"hpcnn-perf: error: --show={STORED_RECORD}: not a --mode=paired record of hpcnn-perf gate-quality "),
    (["hpcnn.perf.cli", "gate-quality", "--slowdowns=1.5"],
     "hpcnn-perf: error: argument --slowdowns: 1.5 is not a comma-separated list of fractions, each 0 <= f < 1 "
     "(0 alone: unchanged code only)"),
])
def test_every_command_reports_usage_errors_as_one_line_with_exit_2(argv, line):
    p = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(line), p.stderr
