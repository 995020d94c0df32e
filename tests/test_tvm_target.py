"""adapters.tvm_target: the host target turns off the instruction sets the OS does not list (a VM's
hypervisor may hide AVX-512 of a processor LLVM names znver4: code built for it died of SIGILL)."""

from adapters.tvm_target import cpu_flags, hidden_features

ZEN4_VM = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma vaes vpclmulqdq sha_ni\nbugs\t\t: sysret_ss_attrs\n"
ZEN4_BARE = ("flags\t\t: fpu avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi "
             "avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq avx512_bf16\n")


def test_what_the_vm_hides_is_turned_off_and_what_it_shows_is_kept():
    off = hidden_features(cpu_flags(ZEN4_VM))
    assert "-avx512f" in off and "-avx512vnni" in off and "-gfni" in off
    assert "-vaes" not in off and "-vpclmulqdq" not in off  # listed by the VM: kept
    bare = hidden_features(cpu_flags(ZEN4_BARE))  # cpuinfo's avx512_vnni is LLVM's avx512vnni
    assert "-avx512vnni" not in bare and "-avx512f" not in bare and "-avx512fp16" in bare


def test_unknown_flags_turn_nothing_off():
    assert cpu_flags("processor : 0\n") is None and hidden_features(None) == []
