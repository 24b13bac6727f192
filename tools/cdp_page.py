#!/usr/bin/env python3
"""tools/cdp_page.py: open one page in headless Chromium, wait until it says it is done,
then print what the caller asks for and save a screenshot (tools/web_check.sh's driver).

--dump-dom cannot wait for work a page does in a Web Worker (the page is "loaded" long
before), so this drives Chromium over its DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages ending in a NUL byte on file descriptors 3 and
4), with the Python standard library only. It loads URL in a window WIDTH px wide, polls
the JavaScript expression WAIT until it is true (or TIMEOUT s pass), then prints one line
per --eval EXPRESSION: its value as JSON; then "console: TEXT" for every console message
and uncaught exception the page produced; with --screenshot FILE, a PNG of the whole
page. Exits 0 when WAIT came true, 1 on a timeout or a failure (one line says which).

Usage: cdp_page.py CHROMIUM URL --width W --wait EXPR [--timeout S] [--eval EXPR]...
                   [--screenshot FILE]
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    """Chromium with its DevTools protocol on two pipes."""

    def __init__(self, chromium, width, height, profile):
        to_child, self.to_browser = os.pipe()
        self.from_browser, from_child = os.pipe()

        def fds():   # the browser reads commands on fd 3, writes answers on fd 4
            ours = (self.to_browser, self.from_browser)
            read_end, write_end = os.dup(to_child), os.dup(from_child)   # above 4
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)
            for fd in (to_child, from_child, read_end, write_end) + ours:
                if fd > 4:
                    os.close(fd)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--user-data-dir=" + profile, "--window-size=%d,%d" % (width, height),
             "--remote-debugging-pipe", "about:blank"],
            close_fds=False, preexec_fn=fds,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe (did it start?)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        command = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self.to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            message = self.read_message(deadline)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError("%s: %s" % (method, message["error"].get("message")))
                return message.get("result", {})
            self.events.append(message)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def console_lines(events):
    """The console messages and uncaught exceptions among the events, one line each."""
    lines = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled":
            lines.append("%s: %s" % (p.get("type"), " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
        elif e.get("method") == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            lines.append("exception: %s" % d.get("exception", {}).get("description", d.get("text")))
        elif e.get("method") == "Log.entryAdded":
            entry = p.get("entry", {})
            lines.append("%s: %s (%s)" % (entry.get("level"), entry.get("text"), entry.get("url", "")))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chromium")
    parser.add_argument("url")
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--wait", required=True)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--eval", action="append", default=[])
    parser.add_argument("--screenshot")
    a = parser.parse_args()
    profile = tempfile.mkdtemp(prefix="cdp_page.")
    browser = Browser(a.chromium, a.width, a.height, profile)
    status = 1
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(domain + ".enable", session=session)
        browser.send("Emulation.setDeviceMetricsOverride", {"width": a.width, "height": a.height,
                     "deviceScaleFactor": 1, "mobile": False}, session=session)
        # no scrollbar: the page is laid out at the full width both when it is checked and
        # when captureBeyondViewport lays it out again for the screenshot (with a scrollbar
        # the picture was cut 15 px short of the layout, the right edge lost)
        browser.send("Emulation.setScrollbarsHidden", {"hidden": True}, session=session)
        browser.send("Page.navigate", {"url": a.url}, session=session)
        deadline = time.time() + a.timeout
        done = False
        while time.time() < deadline:
            r = browser.send("Runtime.evaluate", {"expression": "!!(%s)" % a.wait,
                             "returnByValue": True}, session=session)
            if r.get("result", {}).get("value") is True:
                done = True
                break
            time.sleep(0.2)
        for expression in a.eval:
            r = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                             session=session)
            print(json.dumps(r.get("result", {}).get("value")))
        if a.screenshot:
            shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                                session=session)
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        for line in console_lines(browser.events):
            print("console: " + line)
        if done:
            status = 0
        else:
            print("timeout: %s was not true after %g s" % (a.wait, a.timeout))
    except (RuntimeError, TimeoutError, OSError, KeyError) as e:
        print("failed: %s" % e)
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
