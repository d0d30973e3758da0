// Entry of the pages bundle: the little behaviour the server-rendered pages need —
// confirmations, importing a file, run actions (cancel, approve, fork), and the queue
// page's live figures. Every page loads it; each part looks for its own elements.
import { applyPatch, equal, mergePatch } from "../flow/diff";
import { api, ApiError } from "../api/client";
import { formatTime } from "../flow/time";
import { initQueues } from "./queues";

function message(e: unknown): string {
  return e instanceof ApiError ? e.message + (e.problems.length ? "\n\n" + e.problems.map((p) => `• ${p.path ?? ""} ${p.message}`).join("\n") : "") : String(e);
}

function showError(where: Element | null, e: unknown): void {
  const box = where?.querySelector<HTMLElement>(".action-error") ?? document.getElementById("page-error");
  if (box) {
    box.textContent = message(e);
    box.hidden = false;
  } else alert(message(e));
}

// Forms and buttons that ask first.
document.addEventListener("submit", (e) => {
  const f = e.target as HTMLFormElement;
  const q = f.dataset.confirm;
  if (q && !confirm(q)) e.preventDefault();
});

// Buttons that call the API: data-post (POST) or data-delete (DELETE) with the URL,
// data-confirm to ask first, data-then: "reload" (default) or "go" (to the answer's run).
document.addEventListener("click", async (e) => {
  const b = (e.target as Element).closest<HTMLButtonElement>("button[data-post], button[data-delete]");
  if (!b) return;
  e.preventDefault();
  if (b.dataset.confirm && !confirm(b.dataset.confirm)) return;
  const body = b.dataset.body ? (JSON.parse(b.dataset.body) as unknown) : undefined;
  b.disabled = true;
  try {
    const url = b.dataset.post ?? b.dataset.delete!;
    const res = await fetch(url, {
      method: b.dataset.post ? "POST" : "DELETE",
      // A JSON request also without a body: the server accepts changes only as such.
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) {
      const err = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
      throw new ApiError(res.status, err.error?.code ?? "internal", err.error?.message ?? `failed (${res.status})`);
    }
    if (b.dataset.done) b.textContent = b.dataset.done;
    if (b.dataset.then !== "none") location.reload();
  } catch (err) {
    showError(b.closest("[data-actions]"), err);
  } finally {
    b.disabled = false;
  }
});

// The starter gallery: a card opens its example as a new flow, named as typed in the
// new-flow form when something is typed there.
document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest<HTMLAnchorElement>("a.gallery-link");
  const name = (document.getElementById("new-name") as HTMLInputElement | null)?.value.trim();
  if (!a || !name || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  const url = new URL(a.href);
  url.searchParams.set("name", name);
  location.href = url.toString();
});

// Import a flow file from the flows page.
const importInput = document.getElementById("import-file") as HTMLInputElement | null;
importInput?.addEventListener("change", async () => {
  const file = importInput.files?.[0];
  if (!file) return;
  let doc: unknown;
  try {
    doc = JSON.parse(await file.text());
  } catch (e) {
    showError(importInput.closest("[data-actions]"), `${file.name} is not JSON: ${(e as Error).message}`);
    return;
  }
  try {
    const opts = { overwrite: false, partial: false };
    let saved;
    for (;;) {
      try {
        saved = await api.importFlow(doc, opts);
        break;
      } catch (e) {
        if (e instanceof ApiError && e.status === 409 && !opts.overwrite) {
          if (!confirm(`${e.message}\n\nReplace the existing flow?`)) return;
          opts.overwrite = true;
          continue;
        }
        const gaps = e instanceof ApiError ? e.problems.filter((p) => p.code === "langflow_unmapped") : [];
        if (gaps.length && !opts.partial) {
          const lines = gaps.map((p) => `• ${p.message}`).join("\n");
          if (!confirm(`${gaps.length} Langflow node(s) have no Sluice equivalent:\n\n${lines}\n\nImport the rest, with a placeholder to replace for each of these?`)) return;
          opts.partial = true;
          continue;
        }
        throw e;
      }
    }
    if (saved.import) sessionStorage.setItem(`sluice-import:${saved.id}`, JSON.stringify(saved.import));
    location.href = `/flows/${encodeURIComponent(saved.id)}`;
  } catch (e) {
    showError(importInput.closest("[data-actions]"), e);
  } finally {
    importInput.value = "";
  }
});

// Approve or reject a waiting run on its page.
document.querySelectorAll<HTMLFormElement>("form[data-approval]").forEach((f) => {
  f.addEventListener("submit", async (e) => {
    e.preventDefault();
    const submitter = (e as SubmitEvent).submitter as HTMLButtonElement | null;
    const decision = submitter?.value === "reject" ? "reject" : "approve";
    const data = new FormData(f);
    const d: { decision: "approve" | "reject"; value?: unknown; comment?: string } = { decision };
    const text = String(data.get("value") ?? "").trim();
    try {
      if (decision === "approve" && text && text !== (f.dataset.original ?? "").trim()) d.value = JSON.parse(text);
      const comment = String(data.get("comment") ?? "");
      if (comment) d.comment = comment;
      await api.resume(f.dataset.flow!, f.dataset.run!, f.dataset.approval!, d);
      location.reload();
    } catch (err) {
      showError(f, err);
    }
  });
});

// Fork a run from a checkpoint with an edited state.
const fork = document.querySelector<HTMLFormElement>("form[data-fork]");
fork?.addEventListener("submit", async (e) => {
  e.preventDefault();
  const original = JSON.parse(document.getElementById("checkpoint-state")?.textContent ?? "null") as unknown;
  const text = (fork.querySelector("textarea") as HTMLTextAreaElement).value;
  try {
    const edited = JSON.parse(text) as unknown;
    const patch = mergePatch(original, edited);
    if (!edited || typeof edited !== "object" || Array.isArray(edited)) throw new Error("the state is a JSON object");
    if (patch !== undefined && !equal(applyPatch(original, patch), edited)) throw new Error("this edit cannot be written as a merge patch (a value set to null?)");
    const started = await api.fork(fork.dataset.flow!, fork.dataset.run!, fork.dataset.fork!, patch);
    location.href = `/flows/${encodeURIComponent(started.flow)}/runs/${encodeURIComponent(started.run)}`;
  } catch (err) {
    showError(fork, err instanceof SyntaxError ? `The state is not JSON: ${err.message}` : err);
  }
});

// A run page of a run still going reloads as it moves on (unless a form is being edited).
const live = document.querySelector<HTMLElement>("[data-live-run]");
if (live) {
  void import("../live/socket").then(({ LiveFlow }) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const editing = () => !!document.activeElement?.closest("form");
    new LiveFlow(
      live.dataset.flow!,
      {
        event: (ev) => {
          if (ev.run !== live.dataset.liveRun) return;
          clearTimeout(timer);
          timer = setTimeout(() => !editing() && location.reload(), 400);
        },
      },
      live.dataset.after ?? "",
    );
  });
}

// Times the server wrote in its own zone, in the browser's, in the one format live lists use.
document.querySelectorAll<HTMLTimeElement>("time[data-local]").forEach((t) => {
  const text = formatTime(t.dateTime);
  if (text) t.textContent = text;
});

initQueues();
