"""collbench's nccl_tuner.conf reader against NCCL's example tuner plugin itself, compiled from
its source: the rules it loads from well-formed and malformed files, and the algorithm,
protocol and channel count it hands NCCL per collective and size (with an unavailable pair
falling through). Needs the plugin's source folder (NCCL's plugins/tuner/example or
ext-tuner/example, or RCCL's CSV ext-tuner/example) in COLLBENCH_TUNER_EXAMPLE, and a C
compiler; skipped otherwise."""

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from collbench.analysis.tune.tuner_conf import render_tuner_conf
from collbench.analysis.tune.tuner_conf_rules import ALGORITHMS, COLLECTIVES, PROTOCOLS, SIZE_MAX
from tests.unit.tune.test_tune_conf import MIXED
from tests.unit.tune.tuner_plugin import lookup, plugin_rules

EXAMPLE = os.environ.get("COLLBENCH_TUNER_EXAMPLE", "")
pytestmark = pytest.mark.skipif(
    not (EXAMPLE and (Path(EXAMPLE) / "plugin.c").is_file() and shutil.which("cc")),
    reason="set COLLBENCH_TUNER_EXAMPLE to the example tuner plugin's source folder "
    "(NCCL >= 2.27.5: plugins/tuner/example or ext-tuner/example) and have a C compiler",
)

# The count the plugin gives a call no rule takes, or whose rule says -1: NCCL's copy starts
# from 1, RCCL's from 0 (the library's own count).
SOURCE = Path(EXAMPLE) / "plugin.c" if EXAMPLE else None
UNMATCHED = 0 if SOURCE and SOURCE.is_file() and "*nChannels = 0;" in SOURCE.read_text() else 1

# Loads the plugin with NCCL_TUNER_CONFIG_FILE, prints the rules it kept ("C ..."), then for
# each stdin query "collective bytes ignoredAlgo ignoredProto" the pair whose cost it set to 0
# and the channel count it returned ("Q ...").
DRIVER = r"""
#define _GNU_SOURCE
#include "plugin.c"
int main(int argc, char** argv) {
  void* context = NULL;
  size_t nRanks = strtoull(argv[1], NULL, 10), nNodes = strtoull(argv[2], NULL, 10);
  if (pluginInit(&context, 0, nRanks, nNodes, NULL, NULL, NULL) != ncclSuccess) return 1;
  TunerContext* ctx = (TunerContext*)context;
  for (int i = 0; i < ctx->numConfigs; i++) {
    TuningConfig* c = &ctx->configs[i];
    printf("C %s %zu %zu %s %s %d %d %d %d %d\n", collTypeToString(c->collType), c->minBytes,
           c->maxBytes, algorithmToString(c->algorithm), protocolToString(c->protocol),
           c->nChannels, c->nNodes, c->nRanks, c->numPipeOps, c->regBuff);
  }
  int coll, ia, ip;
  unsigned long long nbytes;
  while (scanf("%d %llu %d %d", &coll, &nbytes, &ia, &ip) == 4) {
    float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) table[a][p] = 1.0;
    if (ia >= 0) table[ia][ip] = NCCL_ALGO_PROTO_IGNORE;
    int nChannels = 77;
    pluginGetCollInfo(context, (ncclFunc_t)coll, (size_t)nbytes, 1, (float**)table,
                      NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nChannels);
    const char* algo = "-";
    const char* proto = "-";
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
        if (table[a][p] == 0.0) { algo = algorithmToString(a); proto = protocolToString(p); }
    printf("Q %s %s %d\n", algo, proto, nChannels);
  }
  return 0;
}
"""

MALFORMED = [
    "# comment",
    "allreduce,0,65535,tree,ll,4,-1",
    "allreduce,0,65535,tree,ll,4,-1,-1,-1,-1,7",
    "allreduce,0,,tree,ll,4,-1,-1,-1",
    "all_reduce,0,65535,Tree,ll,4,-1,-1",
    "allreduce,0,64K,tree,ll,4,-1,-1 # why",
    "  # a,b,c,d,e,f,g,h",
    "allreduce,0,-1,tree,ll,4,-1,-1",
    " reducescatter , 5 , 9 , ring , ll128 , 3 , -1 , -1 ",
    "broadcast,1,2,pat,simple,0,1,8,-1,-1\r",
    "allreduce,0,65535,tree,ll,4,-1,-1" + " " * 230 + ",9",
    "reduce,+7,0x10,nvls,simple,2147483648,99999999999,-5,1,0",
    "allgather,0,1000,nvls,simple,3,-1,8",
    "allgather,0,1000,ring,simple,-1,-1,-1",
]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tuner")
    source = folder / "driver.c"
    source.write_text(DRIVER)
    binary = folder / "driver"
    include = [f"-I{EXAMPLE}", f"-I{Path(EXAMPLE) / 'nccl'}"]
    subprocess.run(["cc", "-std=gnu99", *include, "-o", str(binary), str(source)], check=True)
    return binary


def _plugin(driver, text, nranks, nnodes, queries, tmp_path):
    path = tmp_path / "nccl_tuner.conf"
    path.write_text(text)
    stdin = "".join(f"{coll} {size} {algo} {proto}\n" for coll, size, algo, proto in queries)
    env = {**os.environ, "NCCL_TUNER_CONFIG_FILE": str(path)}
    run = subprocess.run(
        [str(driver), str(nranks), str(nnodes)],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    return [line.split()[1:] for line in lines if line[0] == "C"], [
        line.split()[1:] for line in lines if line[0] == "Q"
    ]


def _queries(rules):
    sizes = {0, 1, 2**40, SIZE_MAX}
    for rule in rules:
        sizes |= {edge + step for edge in (rule.min_bytes, rule.max_bytes) for step in (-1, 0, 1)}
    rng = random.Random(0)
    return [
        (coll, size, *pair)
        for coll in range(len(COLLECTIVES))
        for size in sorted(size for size in sizes if 0 <= size <= SIZE_MAX)
        for pair in ((-1, -1), (rng.randrange(len(ALGORITHMS)), rng.randrange(len(PROTOCOLS))))
    ]


@pytest.mark.parametrize("name", ["rendered", "rendered-2x16", "malformed"])
@pytest.mark.parametrize("nranks,nnodes", [(8, 1), (16, 2)])
def test_reader_agrees_with_the_compiled_plugin(driver, tmp_path, name, nranks, nnodes):
    text = {
        "rendered": render_tuner_conf(MIXED)[0],
        "rendered-2x16": render_tuner_conf(MIXED, nodes=2, ranks=16)[0],
        "malformed": "\n".join(MALFORMED) + "\n",
    }[name]
    rules = plugin_rules(text)
    queries = _queries(rules)
    loaded, answers = _plugin(driver, text, nranks, nnodes, queries, tmp_path)
    assert loaded == [rule.line().replace(",", " ").split() for rule in rules]
    for (coll, size, algo, proto), answer in zip(queries, answers, strict=True):
        ignored = [(ALGORITHMS[algo], PROTOCOLS[proto])] if algo >= 0 else []
        rule = lookup(rules, COLLECTIVES[coll], size, nnodes, nranks, ignored=ignored)
        expected = ["-", "-", str(UNMATCHED)]
        if rule is not None:
            channels = UNMATCHED if rule.channels == -1 else rule.channels
            expected = [rule.algorithm, rule.protocol, str(channels)]
        assert answer == expected, (COLLECTIVES[coll], size, ignored)
