// Live parts of the pages, without a framework: [data-live] fragments are re-fetched every data-interval ms
// (until one carries data-final), and a [data-stream] element shows a streamed text body as it arrives.
// Without JavaScript the pages are complete as served; this only keeps them current.
"use strict";

function pollFragment(element) {
  const interval = Number(element.dataset.interval || 2000);
  const tick = async () => {
    if (element.querySelector("[data-final]")) return;
    try {
      const response = await fetch(element.dataset.live, { credentials: "same-origin", cache: "no-store" });
      if (response.status === 401) { window.location.reload(); return; }
      if (response.ok) {
        const focused = document.activeElement && element.contains(document.activeElement);
        if (!focused) element.innerHTML = await response.text();
      }
    } catch (error) { /* the lead is restarting: try again next tick */ }
    window.setTimeout(tick, interval);
  };
  window.setTimeout(tick, interval);
}

async function streamText(element) {
  try {
    const response = await fetch(element.dataset.stream, { credentials: "same-origin" });
    if (!response.ok || !response.body) return;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      const atBottom = element.scrollTop + element.clientHeight >= element.scrollHeight - 4;
      element.textContent = text;
      if (atBottom) element.scrollTop = element.scrollHeight;
    }
    element.dataset.complete = "1";
  } catch (error) { /* keep what the page was served with */ }
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(pollFragment);
  document.querySelectorAll("[data-stream]").forEach(streamText);
});
