//! The gateway's status page, `/ui`, in a real headless browser (Debian's `chromium`, which `make setup`
//! installs): after its script ran against a gateway serving a planned app, the page shows the machine's cores,
//! the app's instances where they are pinned and its requests, and its screenshot is a rendered page.

use std::path::Path;
use std::process::Command;

use jig_test_support::{Gateway, probe_app};

const PROFILES: &str =
    "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nclassifier,fast,cpu:1,1,1,2,500,test\n";

fn chromium(dir: &Path, url: &str, what: &[&str]) -> Vec<u8> {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        // Virtual time runs the page's timers (it polls every 2 s) without waiting for them.
        .args(["--window-size=1100,700", "--virtual-time-budget=7000"])
        .args(what)
        .arg(url)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run chromium ({e}): `make setup` installs it (apt-get install chromium)"));
    assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn the_status_page_shows_the_machine_the_plan_and_live_requests_in_a_browser() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bundle");
    probe_app(&dir, "shown", 0.9, Some(PROFILES));
    let gateway = Gateway::start(&scratch.path().join("state"), &["--cores", "2", "--gpus", "none"]);
    let deployed = gateway.jig("deploy").arg(&dir).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    for _ in 0..7 {
        let reply = gateway.http("POST", "/v1/apps/shown/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let page = gateway.http("GET", "/ui", &[], b"");
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));

    let url = format!("{}/ui", gateway.url());
    let dom = String::from_utf8(chromium(scratch.path(), &url, &["--dump-dom"])).unwrap();
    let body = dom.split("<script>").next().unwrap();
    assert!(body.contains("1 app(s) · updated"), "the script ran and reached the API: {body}");
    assert!(body.contains("(1 of 2 free)"), "the machine, one core held: {body}");
    assert!(body.contains(r#"data-app="shown""#) && body.contains("planned for"), "{body}");
    assert!(body.contains("<td>classifier</td><td>fast</td><td>cpu:1</td>"), "the instance: {body}");
    assert!(body.contains("cores 0") || body.contains("cores 1"), "where it is pinned: {body}");
    assert!(body.contains(r#"<b class="requests">7</b>"#), "the requests served: {body}");
    assert!(body.contains(r#"<b class="latency">p50 ≤"#), "a latency from the histogram: {body}");

    chromium(scratch.path(), &url, &["--screenshot=ui.png"]);
    let png = std::fs::read(scratch.path().join("ui.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((size(16), size(20)), (1100, 700), "the window's size");
    // A blank 1100×700 page compresses to a few KiB; the rendered one (text, tables, chart) to tens.
    assert!(png.len() > 15_000, "a rendered page, {} bytes", png.len());
    if let Some(keep) = std::env::var_os("JIG_UI_SCREENSHOT") {
        std::fs::copy(scratch.path().join("ui.png"), keep).unwrap();
    }
}
