"""The embedded Spark JVM's JIT: C1 alone for a short job (``spark_session(quick_jit=True)``)."""

from __future__ import annotations

from sdschat.pipeline.spark import spark_session


def _vm_option(spark, name: str) -> str:
    jvm = spark._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    return str(bean.getVMOption(name).getValue())


def test_a_short_jobs_jvm_compiles_with_c1_alone_and_keeps_the_parallel_collector(tmp_path):
    conf = {"spark.driver.extraJavaOptions": "-Dsdschat.test.option=added"}
    with spark_session("sdschat-quick-jit", log_dir=tmp_path, quick_jit=True, conf=conf) as spark:
        assert spark.range(1000).selectExpr("sum(id)").first()[0] == 499_500
        args = [
            str(a) for a in spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
        ]
        assert _vm_option(spark, "TieredStopAtLevel") == "1"  # what the JVM runs with, not only what it was given
        assert not any(a.startswith("-XX:Tier4") for a in args), args  # no C2 to delay
        # the collector kept; a caller's options after the session's own, so that one of the same name wins
        assert "-XX:+UseParallelGC" in args, args
        assert args.index("-XX:TieredStopAtLevel=1") < args.index("-Dsdschat.test.option=added"), args
