// Shared by the browser tests: builds and runs a Herald server on
// 127.0.0.1, launches Debian's Chromium through playwright-core, records
// every request a page makes, and saves screenshots.
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { chromium } from 'playwright-core';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

// Every wait in the tests is bounded by one of these.
export const TIMEOUT = { build: 300_000, start: 30_000, ui: 15_000, event: 10_000, stop: 15_000 };

// deadline rejects after ms with what was awaited, so a hang fails with a
// message instead of running into the test runner's own timeout.
export function deadline(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// artifacts is the directory for screenshots and the server log:
// $HERALD_ARTIFACTS, or a new herald-browser-<time> directory in the
// system's temporary directory.
export async function artifactsDir() {
  const dir = process.env.HERALD_ARTIFACTS
    ? resolve(process.env.HERALD_ARTIFACTS)
    : await mkdtemp(join(tmpdir(), `herald-browser-${Date.now()}-`));
  await mkdir(dir, { recursive: true });
  return dir;
}

// startServer builds the server from this checkout and runs it on a free
// port of 127.0.0.1 with a fresh data directory, its log written to
// <dir>/server.log. It resolves once /readyz answers 200.
export async function startServer(dir) {
  const bin = join(dir, 'herald');
  await deadline(promisify(execFile)('go', ['build', '-o', bin, './server'], { cwd: repo }), TIMEOUT.build, 'go build ./server');
  const log = createWriteStream(join(dir, 'server.log'));
  // Rate limits off: the tests make dozens of mutations a second from one
  // address, and a user of theirs reads in seconds what a person reads in
  // minutes (a conversation opened costs some 2,600 query points, as its
  // members count as the largest group's); the limits have tests of their
  // own (graph, server).
  const args = ['-addr', '127.0.0.1:0', '-data', join(dir, 'data'), '-log-format', 'text', '-rate-limit-user', 'off', '-rate-limit-address', 'off', '-rate-limit-query-user', 'off', '-rate-limit-query-address', 'off'];
  const proc = spawn(bin, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.pipe(log);
  const exited = new Promise((res) => proc.once('exit', (code, signal) => res({ code, signal })));

  // The server logs `msg=listening addr=127.0.0.1:<port>` once it listens.
  const addr = await deadline(
    new Promise((res, reject) => {
      let buf = '';
      proc.stderr.on('data', (chunk) => {
        log.write(chunk);
        if (buf === null) return;
        buf += chunk;
        const m = /msg=listening addr=(127\.0\.0\.1:\d+)/.exec(buf);
        if (m) {
          buf = null;
          res(m[1]);
        }
      });
      exited.then(({ code, signal }) => reject(new Error(`server exited (${code ?? signal}) before listening; see ${join(dir, 'server.log')}`)));
    }),
    TIMEOUT.start,
    'the server to log its listen address',
  );
  const base = `http://${addr}`;
  const started = Date.now();
  for (;;) {
    const ok = await fetch(`${base}/readyz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() - started > TIMEOUT.start) throw new Error(`${base}/readyz not ready after ${TIMEOUT.start} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }

  return {
    base,
    host: addr,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const done = await deadline(exited, TIMEOUT.stop, 'the server to shut down').catch((err) => {
        proc.kill('SIGKILL');
        throw err;
      });
      log.end();
      return done;
    },
  };
}

// launchBrowser starts the system's Chromium headless. playwright-core
// downloads no browser: CHROMIUM may name another binary.
export function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    timeout: TIMEOUT.start,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

// startAll starts what a test file of pages needs: a new artifacts
// directory (printed), a server in it and a browser. Pass the result to
// stopAll in the file's after hook.
export async function startAll() {
  const dir = await artifactsDir();
  console.log(`artifacts: ${dir}`);
  const server = await startServer(dir);
  return { dir, server, browser: await launchBrowser() };
}

// stopAll closes the browser and stops the server that startAll started
// (either may be missing if startAll failed half way), and fails unless
// the server shut down cleanly: SIGTERM ends it with status 0.
export async function stopAll(env) {
  await env?.browser?.close();
  const exit = await env?.server?.stop();
  if (exit) assert.equal(exit.code, 0, `server exit ${JSON.stringify(exit)}; log in ${env.dir}/server.log`);
}

// recordedContext opens a browser context that records the URL of every
// request and websocket its pages open, and the errors they log.
export async function recordedContext(browser) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  context.setDefaultTimeout(TIMEOUT.ui);
  const urls = [];
  const pageErrors = [];
  context.on('request', (r) => urls.push(r.url()));
  context.on('page', (page) => {
    page.on('websocket', (ws) => urls.push(ws.url()));
    page.on('pageerror', (err) => pageErrors.push(String(err)));
  });
  return { context, urls, pageErrors };
}

// foreignRequests returns the recorded URLs that went anywhere but the
// server: data: and blob: URLs stay in the page and are allowed.
export function foreignRequests(urls, host) {
  return urls.filter((u) => {
    const url = new URL(u);
    if (url.protocol === 'data:' || url.protocol === 'blob:') return false;
    return !(['http:', 'ws:'].includes(url.protocol) && url.host === host);
  });
}

// until polls f every 100 ms until it returns a truthy value, which it
// returns; after ms it fails saying what was awaited and, if given, what
// describe() says about the last state seen.
export async function until(f, ms, what, describe) {
  const started = Date.now();
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() - started > ms) {
      const last = describe ? `; last seen: ${await describe()}` : '';
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// screenshot saves the page as <dir>/<name>.png and prints the path.
export async function screenshot(page, dir, name, fullPage = true) {
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage });
  console.log(`screenshot: ${path}`);
  return path;
}

// gql posts one GraphQL operation to the server as token's owner and returns
// its data; a GraphQL error fails the test.
export async function gql(base, token, query, variables = {}) {
  const res = await deadline(
    fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
    }),
    TIMEOUT.ui,
    'a GraphQL request',
  );
  const body = await res.json();
  if (body.errors?.length) throw new Error(`GraphQL error for ${query}: ${JSON.stringify(body.errors)}`);
  return body.data;
}

// signUp creates a user over HTTP and returns { id, handle, token }.
export async function signUp(base, handle) {
  const d = await gql(base, null, 'mutation($h: String!) { signUp(input: {handle: $h, password: "correct horse"}) { token user { id handle } } }', { h: handle });
  return { ...d.signUp.user, token: d.signUp.token };
}

// uniqueHandle returns a fresh valid handle starting with prefix.
export function uniqueHandle(prefix) {
  return `${prefix}_${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`.slice(0, 30);
}
