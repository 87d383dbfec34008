/* benchdnn descriptor parsing: defaults, derivations, rank inference, errors. */
#include "test_util.h"

#include "../tools/nconv/cli.h"

static void parses(const char *s, int transposed, const char *want_desc, int64_t want_pe0, const char *want_name) {
    cli_problem cp;
    char err[512] = "", desc[512] = "";
    int r = desc_parse(s, transposed, &cp, err, sizeof err);
    CHECK(r == 0, "'%s': %s", s, err);
    if (r) return;
    nconv_problem_to_desc(&cp.p, desc, sizeof desc);
    CHECK(!strcmp(desc, want_desc), "'%s' -> '%s', want '%s'", s, desc, want_desc);
    CHECK(cp.p.pad_end[0] == want_pe0, "'%s': pad_end[0] = %lld, want %lld", s, (long long)cp.p.pad_end[0],
          (long long)want_pe0);
    CHECK(!strcmp(cp.name, want_name), "'%s': name '%s', want '%s'", s, cp.name, want_name);
}

static void rejects(const char *s, int transposed, const char *needle) {
    cli_problem cp;
    char err[512] = "";
    int r = desc_parse(s, transposed, &cp, err, sizeof err);
    CHECK(r != 0 && strstr(err, needle), "'%s': rc %d, message '%s' (want '%s')", s, r, err, needle);
}

int main(void) {
    /* Defaults: mb 2, g 1, stride 1, square from h. */
    parses("ic3ih224oc64oh112kh7sh2ph3", 0, "g1mb2_ic3ih224iw224_oc64oh112ow112_kh7kw7_sh2sw2_ph3pw3_dh0dw0", 2, "");
    parses("mb8ic3ih224oc64oh112kh7sh2ph3n\"resnet50:conv1\"", 0,
           "g1mb8_ic3ih224iw224_oc64oh112ow112_kh7kw7_sh2sw2_ph3pw3_dh0dw0", 2, "resnet50:conv1");
    /* Output derived from padding; padding derived from output. */
    parses("mb1ic16oc16_ih10kh5_kh5ph7sh1", 0, "g1mb1_ic16ih10iw10_oc16oh20ow20_kh5kw5_sh1sw1_ph7pw7_dh0dw0", 7, "");
    parses("ic32oc13_ih13oh12kh3ph0_n\"tails_conv:1\"", 0,
           "g1mb2_ic32ih13iw13_oc13oh12ow12_kh3kw3_sh1sw1_ph0pw0_dh0dw0", 1, "tails_conv:1");
    parses("g1ic4ih84oc16oh20kh8sh4", 0, "g1mb2_ic4ih84iw84_oc16oh20ow20_kh8kw8_sh4sw4_ph0pw0_dh0dw0", 0, "");
    /* 1D and 3D; dilation 0 = none. */
    parses("mb4ic1iw16000oc512ow3199kw10sw5pw0", 0, "g1mb4_ic1iw16000_oc512ow3199_kw10_sw5_pw0_dw0", 0, "");
    parses("mb1ic16id1ih1iw1oc16od2oh2ow1kd3kh3kw1dd1dh1ph1pd1", 0,
           "g1mb1_ic16id1ih1iw1_oc16od2oh2ow1_kd3kh3kw1_sd1sh1sw1_pd1ph1pw0_dd1dh1dw0", 4, "");
    parses("mb2ic64id16ih56iw56oc128od16oh56ow56kd3kh3kw3pd1ph1pw1", 0,
           "g1mb2_ic64id16ih56iw56_oc128od16oh56ow56_kd3kh3kw3_sd1sh1sw1_pd1ph1pw1_dd0dh0dw0", 1, "");
    parses("ic4id5oc4kd3", 0, "g1mb2_ic4id5ih5iw5_oc4od3oh3ow3_kd3kh3kw3_sd1sh1sw1_pd0ph0pw0_dd0dh0dw0", 0, "");
    /* Deconvolution: ic/ih are the transposed input; end padding from the output. */
    parses("g1oc16ic16_ow5iw8kw3pw3_n\"deconv_ci_1d:gemm\"", 1, "--transposed g1mb2_ic16iw8_oc16ow5_kw3_sw1_pw3_dw0", 2,
           "deconv_ci_1d:gemm");
    parses("mb16ic256ih8oc128oh16kh4sh2ph1", 1,
           "--transposed g1mb16_ic256ih8iw8_oc128oh16ow16_kh4kw4_sh2sw2_ph1pw1_dh0dw0", 1, "");
    /* A given output wins: the end padding absorbs the difference, as in benchdnn. */
    parses("ic3ih5oc3oh9kh3ph0", 0, "g1mb2_ic3ih5iw5_oc3oh9ow9_kh3kw3_sh1sw1_ph0pw0_dh0dw0", 6, "");
    rejects("mb2ih5oc3kh3", 0, "ic and oc");
    rejects("ic3ih5oc3kh3xx1", 0, "unknown token");
    rejects("ic3ih5oc3kh3sh0", 0, "strides");
    rejects("ic3oc3", 0, "no spatial");
    rejects("ic3ih5oc3kw3", 0, "needs both");
    rejects("ic3id5ih5oc3kd3kh3", 0, "only one of h and w");
    rejects("ic3ih5oc3kh9", 0, "output size");
    rejects("ic3ih5oc3kh", 0, "needs a non-negative integer");
    rejects("ic3ih99999999999999999999oc3kh3", 0, "out of range");
    rejects("g2ic3ih5oc4kh3", 0, "not divisible by groups");
    /* Derived numbers obey the bound on given ones (2^40), or the problem's
     * descriptor would not parse back; products must not overflow. */
    rejects("mb1ic1oc1iw1ow1099511627776kw1sw4", 0, "computed padding out of range");
    rejects("mb1ic1oc1iw1099511627776kw1sw2", 1, "computed output size out of range");
    rejects("mb1ic1oc1iw1099511627776kw1sw1099511627776", 1, "strided size out of range");
    rejects("mb1ic1oc1iw5kw1099511627776dw1099511627776", 0, "kernel extent");
    rejects("ic3ih1099511627777oc3kh3", 0, "'ih': number out of range");
    return test_summary();
}
