// A person in a real browser: headless Chromium (Debian's, $CHROMIUM or
// /usr/bin/chromium) driven by puppeteer-core through a provider's own pages.
// It opens the URL given last on the command line, signs in on the login page,
// confirms a device code and consents where asked; with BROWSER_DENY=1 it
// cancels at the first page that offers it instead. It signs in as
// BROWSER_LOGIN (default person@example.com). It stops at the program's
// loopback page or the provider's success page, and logs each step to stderr.
// Used as $BROWSER (the webbrowser crate runs it with the URL) and by the
// device login's prompt. With BROWSER_ELSEWHERE=<file> it is a browser on
// another machine: the redirect to the program's loopback callback never
// reaches it (the navigation is aborted), and the address it ended on is
// written to <file>, for the person to paste. With BROWSER_THEN=<file>, once
// the login is over it waits (up to 60 s) for <file> to hold a URL, and goes
// there in the same browser, the person's session at the provider still
// open (an end-session page), stopping at the app's /signed-out page or the
// provider's own. It never leaves loopback: any other request (a page's web
// fonts) is aborted. With BROWSER_PROFILE=<dir> it keeps its profile (the
// provider's session cookie) there from one run to the next, as a person's
// browser does; with BROWSER_SIGNINS=<file> it adds a line to <file> each time
// it fills in the sign-in page.
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import puppeteer from 'puppeteer-core';

const url = process.argv[process.argv.length - 1];
const deny = process.env.BROWSER_DENY === '1';
const say = (what) => process.stderr.write(`browser: ${what}\n`);

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  userDataDir: process.env.BROWSER_PROFILE || undefined,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const then = process.env.BROWSER_THEN;
const limit = then ? 150_000 : 60_000;
const timer = setTimeout(() => { say(`gave up after ${limit / 1000} s`); process.exit(3); }, limit);
try {
  const page = await browser.newPage();
  const elsewhere = process.env.BROWSER_ELSEWHERE;
  let ended = false;
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    const to = new URL(request.url());
    const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(to.hostname);
    if (!loopback && to.protocol !== 'data:') {
      request.abort();
    } else if (elsewhere && request.isNavigationRequest() && to.pathname.endsWith('/callback')) {
      say('the callback cannot reach the program from here; its address is kept to paste');
      writeFileSync(elsewhere, request.url());
      ended = true;
      request.abort();
    } else {
      request.continue();
    }
  });
  await page.goto(url, { waitUntil: 'load' });
  // One step a page: false once the login is over. A page that navigates on
  // its own (a form that submits itself) throws; it is read again after.
  const step = async () => {
    if (ended) return false;
    const at = new URL(page.url());
    const text = await page.evaluate(() => document.body?.innerText ?? '');
    if (at.hostname === '127.0.0.1' && (at.pathname.endsWith('/callback')
      || at.pathname.endsWith('/signed-out'))) {
      say(`back at the program: ${text.trim().split('\n')[0]}`);
      return false;
    }
    if (/success|signed in/i.test(text) && !(await page.$('form'))) {
      say(`done: ${text.trim().split('\n')[0]}`);
      return false;
    }
    const abort = await page.$('a[href$="/abort"]');
    if (deny && abort) {
      say('cancelling');
      await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), abort.click()]);
      return true;
    }
    if (await page.$('input[name=login]')) {
      say('signing in');
      if (process.env.BROWSER_SIGNINS) appendFileSync(process.env.BROWSER_SIGNINS, 'signed in\n');
      await page.type('input[name=login]', process.env.BROWSER_LOGIN || 'person@example.com');
      await page.type('input[name=password]', 'any');
    } else {
      say(`submitting: ${text.trim().split('\n')[0]}`);
    }
    const submit = await page.$('button[type=submit], input[type=submit], button[autofocus], button');
    if (!submit) {
      say(`nothing to do on ${at.pathname}: ${text.slice(0, 200)}`);
      return false;
    }
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }).catch(() => {}), submit.click()]);
    return true;
  };
  const steps = async () => {
    for (let tries = 0; tries < 20; tries += 1) {
      const more = await step().catch((e) => {
        say(`page moved on (${e.message.split('\n')[0]})`);
        return 'again';
      });
      if (more === false) break;
      if (more === 'again') await new Promise((resolve) => setTimeout(resolve, 300));
    }
  };
  await steps();
  if (then) {
    say('waiting for the next address');
    const until = Date.now() + 60_000;
    while (!existsSync(then) || !readFileSync(then, 'utf8').trim()) {
      if (Date.now() > until) throw new Error('no next address came');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const next = readFileSync(then, 'utf8').trim();
    say(`going to ${new URL(next).pathname}`);
    await page.goto(next, { waitUntil: 'load' });
    await steps();
  }
} finally {
  clearTimeout(timer);
  await browser.close();
}
