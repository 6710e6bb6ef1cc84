// One Lighthouse run of one page, logged in: bench/lighthouse.py calls it.
//   node run.mjs URL COOKIES_JSON OUT.json mobile|desktop
// Chromium is started by puppeteer-core (Lighthouse's own dependency, pinned by the lock) with
// the session's cookies set in its jar, so the page's own requests (htmx fragments, the review
// count) are made as the user, as in a browser; a Cookie request header reaches the document
// only. Lighthouse keeps the jar (disableStorageReset); each run starts a new profile, so the
// cache is cold.
import { writeFileSync } from "node:fs";
import puppeteer from "puppeteer-core";
import lighthouse from "lighthouse";
import desktopConfig from "lighthouse/core/config/desktop-config.js";

const [url, cookiesJson, out, form] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROME_PATH || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
});
try {
  const page = await browser.newPage();
  const origin = new URL(url).origin;
  const cookies = Object.entries(JSON.parse(cookiesJson)).map(([name, value]) => ({ name, value, url: origin }));
  await page.setCookie(...cookies);
  const flags = { output: "json", logLevel: "error", onlyCategories: ["performance", "accessibility"],
                  disableStorageReset: true };
  const result = await lighthouse(url, flags, form === "desktop" ? desktopConfig : undefined, page);
  if (!result || result.lhr.runtimeError) {
    console.error(JSON.stringify(result ? result.lhr.runtimeError : "no result"));
    process.exitCode = 1;
  } else {
    writeFileSync(out, result.report);
  }
} finally {
  await browser.close();
}
