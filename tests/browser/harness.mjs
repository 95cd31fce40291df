// Browser-test harness for the Petrel console: starts a throwaway broker,
// a headless Debian chromium (playwright-core, no browser download), and
// gives small helpers for REST calls and console navigation.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = process.env.PETREL_BIN || path.join(ROOT, 'bin/petrel');
export const OUT = path.resolve(process.env.TEST_OUTPUT_DIR || path.join(ROOT, 'build/test-output/console'));

const sleep = ms => new Promise(r => setTimeout(r, ms));
export { sleep };

/* Starts `petrel standalone` on a free port with a temp data dir. */
export async function startBroker() {
  const dir = mkdtempSync(path.join(tmpdir(), 'petrel-console-'));
  const portFile = path.join(dir, 'port');
  const data = path.join(dir, 'data');
  mkdirSync(data);
  let log = '';
  const child = spawn(BIN, ['standalone', '--listen', '127.0.0.1:0', '--port-file', portFile,
    '--data', data, '--webRoot=' + path.join(ROOT, 'web')], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', d => { log += d; });
  child.stderr.on('data', d => { log += d; });
  let exited = false;
  const exit = new Promise(resolve => child.on('exit', (code, sig) => { exited = true; resolve({ code, sig }); }));
  const broker = {
    dir, child, exit,
    log: () => log,
    exited: () => exited,
    async stop() {
      if (!exited) {
        child.kill('SIGTERM');
        const t = await Promise.race([exit, sleep(8000).then(() => 'timeout')]);
        if (t === 'timeout') { child.kill('SIGKILL'); await exit; }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  process.on('exit', () => { if (!exited) try { child.kill('SIGKILL'); } catch { /* gone */ } });
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline) {
    if (exited) break;
    if (existsSync(portFile)) {
      const port = readFileSync(portFile, 'utf8').trim();
      if (port) { broker.base = 'http://127.0.0.1:' + port; return broker; }
    }
    await sleep(50);
  }
  await broker.stop();
  throw new Error('broker did not start: ' + log);
}

/* One REST call; answers {status, data}. */
export async function rest(base, method, p, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(base + p, init);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  return { status: res.status, data };
}

/* Runs 'fn' over 'items' with at most 'limit' calls in flight. */
export async function pool(items, limit, fn) {
  let i = 0;
  const workers = Array.from({ length: limit }, async () => {
    while (i < items.length) {
      const k = i++;
      await fn(items[k], k);
    }
  });
  await Promise.all(workers);
}

/* Polls 'fn' until it returns a truthy value or 'ms' pass. */
export async function until(fn, ms = 5000, what = 'condition') {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) { last = e; }
    await sleep(100);
  }
  throw new Error('timed out waiting for ' + what + (last instanceof Error ? ': ' + last.message : ''));
}

export async function launchBrowser() {
  const profile = mkdtempSync(path.join(tmpdir(), 'chromium-profile-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  return {
    ctx,
    async close() {
      await ctx.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/* A new tab whose console errors/warnings and page errors are collected. */
export async function openPage(ctx, base) {
  const page = await ctx.newPage();
  const problems = [];
  page.on('console', m => {
    if (m.type() === 'error' || m.type() === 'warning') {
      const loc = m.location();
      problems.push(m.type() + ': ' + m.text() + (loc && loc.url ? ' (' + loc.url + ')' : ''));
    }
  });
  page.on('pageerror', e => problems.push('pageerror: ' + e.message));
  page.setDefaultTimeout(8000);
  await page.goto(base + '/console/#/');
  await page.waitForSelector('body[data-rendered]');
  return { page, problems };
}

/* Navigates the console to 'hash' and waits for route 'name' to render. */
export async function go(page, hash, name) {
  const same = await page.evaluate(h => location.hash === h, hash);
  await page.evaluate(h => { delete document.body.dataset.rendered; if (location.hash === h) return; location.hash = h; }, hash);
  if (same) await page.reload();
  await page.waitForSelector('body[data-rendered="' + name + '"]');
}
