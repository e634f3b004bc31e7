// Drives headless Chromium through a script of steps, for the browser tests of `plait serve`
// (tests/it). The Rust test writes the script as JSON and reads this program's output:
//
//   node tests/browser/drive.mjs SCRIPT.json
//
// SCRIPT.json is an array of steps, or {"steps": [...], "timeout_ms": N, "viewport": [W, H],
// "failure_screenshot": PATH}. The steps run in order in one page:
//
//   {"goto": URL}                          open URL
//   {"wait": SELECTOR}                     wait until SELECTOR is in the page
//   {"wait_attr": [SELECTOR, ATTR, VALUE]} wait until its ATTR is VALUE
//   {"click": SELECTOR}                    click it (waits until it is visible and enabled)
//   {"fill": [SELECTOR, TEXT]}             type TEXT into an input or textarea
//   {"check": SELECTOR}                    tick a checkbox
//   {"text": SELECTOR}                     print {"text": its text content, trimmed}
//   {"attr": [SELECTOR, ATTR]}             print {"attr": its value or null}
//   {"count": SELECTOR}                    print {"count": how many elements match}
//   {"screenshot": PATH}                   save a PNG of the whole page
//   {"eval": "JS expression"}              print {"eval": its value, as JSON}
//   {"sleep_ms": N}                        wait N ms
//
// Any step may carry "timeout_ms" (default 10000). Each step prints one JSON line when it is
// done: {"<kind>": value} (for steps without a value, the step's argument). At the end, the
// page's console errors, uncaught exceptions and failed requests are printed as
// {"console_error": "..."} lines. A failing step ends the program with status 1 and a line
// on stderr naming the step; a bad script or a browser that does not start, status 2.
//
// Environment: PLAIT_TEST_PLAYWRIGHT, a directory holding node_modules/playwright-core
// (required); PLAIT_TEST_CHROMIUM, the browser (default /usr/bin/chromium);
// PLAIT_TEST_CHROMIUM_ARGS, more flags for it, one per line.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

function die(status, message) {
  process.stderr.write(`drive: ${message}\n`);
  process.exit(status);
}

function loadPlaywright() {
  const dir = process.env.PLAIT_TEST_PLAYWRIGHT;
  if (!dir) die(2, 'PLAIT_TEST_PLAYWRIGHT is not set (a directory with node_modules/playwright-core)');
  try {
    return createRequire(path.join(path.resolve(dir), 'noop.js'))('playwright-core');
  } catch (e) {
    return die(2, `cannot load playwright-core from ${dir}: ${e.message}`);
  }
}

function loadScript(file) {
  if (!file) die(2, 'usage: drive.mjs SCRIPT.json');
  let script;
  try {
    script = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    die(2, `cannot read the script ${file}: ${e.message}`);
  }
  if (Array.isArray(script)) script = { steps: script };
  if (!script || !Array.isArray(script.steps)) die(2, 'the script must be an array of steps or {"steps": [...]}');
  return script;
}

const KINDS = ['goto', 'wait', 'wait_attr', 'click', 'fill', 'check', 'text', 'attr', 'count', 'screenshot', 'eval', 'sleep_ms'];

function kindOf(step) {
  const kinds = Object.keys(step || {}).filter((k) => KINDS.includes(k));
  if (kinds.length !== 1) throw new Error(`a step needs exactly one of ${KINDS.join(', ')}`);
  return kinds[0];
}

function pair(arg, n, kind) {
  if (!Array.isArray(arg) || arg.length !== n) throw new Error(`"${kind}" takes an array of ${n}`);
  return arg;
}

/** Runs one step; resolves to what it prints. */
async function run(page, step, timeout) {
  const kind = kindOf(step);
  const arg = step[kind];
  switch (kind) {
    case 'goto':
      await page.goto(arg, { timeout, waitUntil: 'load' });
      return { goto: arg };
    case 'wait':
      await page.waitForSelector(arg, { timeout, state: step.state || 'attached' });
      return { wait: arg };
    case 'wait_attr': {
      const [selector, attr, value] = pair(arg, 3, kind);
      await page.waitForFunction(([s, a, v]) => document.querySelector(s)?.getAttribute(a) === v, [selector, attr, String(value)], { timeout, polling: 50 });
      return { wait_attr: arg };
    }
    case 'click':
      await page.click(arg, { timeout });
      return { click: arg };
    case 'fill': {
      const [selector, text] = pair(arg, 2, kind);
      await page.fill(selector, String(text), { timeout });
      return { fill: selector };
    }
    case 'check':
      await page.check(arg, { timeout });
      return { check: arg };
    case 'text': {
      const el = await page.waitForSelector(arg, { timeout, state: 'attached' });
      return { text: ((await el.textContent()) || '').trim() };
    }
    case 'attr': {
      const [selector, attr] = pair(arg, 2, kind);
      const el = await page.waitForSelector(selector, { timeout, state: 'attached' });
      return { attr: await el.getAttribute(attr) };
    }
    case 'count':
      return { count: await page.locator(arg).count() };
    case 'screenshot':
      await page.screenshot({ path: arg, fullPage: step.full_page !== false, timeout });
      return { screenshot: arg };
    case 'eval':
      return { eval: (await page.evaluate(arg)) ?? null };
    case 'sleep_ms':
      await page.waitForTimeout(Number(arg));
      return { sleep_ms: arg };
    default:
      throw new Error(`unknown step ${kind}`);
  }
}

async function main() {
  const script = loadScript(process.argv[2]);
  const { chromium } = loadPlaywright();
  const args = ['--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
  if (process.getuid?.() === 0) args.push('--no-sandbox');
  // More flags for this run, one per line (a test maps a host name with --host-resolver-rules).
  for (const extra of (process.env.PLAIT_TEST_CHROMIUM_ARGS || '').split('\n')) if (extra.trim()) args.push(extra.trim());
  let browser;
  try {
    browser = await chromium.launch({ executablePath: process.env.PLAIT_TEST_CHROMIUM || '/usr/bin/chromium', headless: true, args });
  } catch (e) {
    die(2, `cannot start Chromium: ${e.message.split('\n')[0]}`);
  }
  const [width, height] = script.viewport || [1280, 900];
  const page = await browser.newPage({ viewport: { width, height } });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const where = m.location()?.url;
    problems.push(`console: ${m.text()}${where ? ` (${where})` : ''}`);
  });
  page.on('pageerror', (e) => problems.push(`exception: ${e.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure()?.errorText || 'failed';
    // Closing an EventSource (leaving a run's page) aborts its request: not a problem.
    if (why.includes('ERR_ABORTED') && r.url().endsWith('/events')) return;
    problems.push(`request failed: ${r.method()} ${r.url()}: ${why}`);
  });
  const report = () => { for (const p of problems) process.stdout.write(JSON.stringify({ console_error: p }) + '\n'); };

  const timeoutDefault = Number(script.timeout_ms) || 10000;
  for (const [i, step] of script.steps.entries()) {
    try {
      const out = await run(page, step, Number(step?.timeout_ms) || timeoutDefault);
      process.stdout.write(JSON.stringify(out) + '\n');
    } catch (e) {
      if (script.failure_screenshot) await page.screenshot({ path: script.failure_screenshot, fullPage: true }).catch(() => {});
      report();
      await browser.close().catch(() => {});
      die(1, `step ${i + 1} ${JSON.stringify(step)} failed: ${String(e.message).split('\n')[0]}`);
    }
  }
  report();
  await browser.close();
}

main().catch((e) => die(2, e.stack || String(e)));
