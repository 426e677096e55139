/*
 * Cronwell's only script (no inline scripts anywhere, so the CSP can forbid them):
 * - sends the CSRF token in the X-CSRFToken header on every HTMX request that is not a GET;
 * - pauses polling panels ([data-poll]) while the tab is hidden and refreshes them on return;
 * - lets the small 4xx fragments the server sends to HTMX (sign-in needed, conflicts) be shown;
 * - shows only the schedule input of the chosen schedule type;
 * - small conveniences: select-all for alerts, delete button armed by the typed name.
 * Every page works without it, apart from live updates.
 */
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.verb !== "get") {
      evt.detail.headers["X-CSRFToken"] = csrfToken();
    }
  });

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-poll")) {
      // Hidden tab: no polling. Ticked rows (a bulk action being prepared): a refresh would
      // untick them, so the list waits until nothing is ticked.
      if (document.hidden || elt.querySelector('input[name="ids"]:checked')) {
        evt.preventDefault();
      }
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) {
      return;
    }
    document.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "cronwell:resume");
    });
  });

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var status = evt.detail.xhr.status;
    if (status === 400 || status === 401 || status === 403 || status === 404 || status === 409 || status === 429) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  function syncScheduleInputs(select) {
    document.querySelectorAll("[data-schedule-for]").forEach(function (group) {
      group.hidden = group.getAttribute("data-schedule-for") !== select.value;
    });
  }

  function syncDeleteButton(input) {
    var button = document.getElementById(input.getAttribute("data-confirm-target"));
    if (button) {
      button.disabled = input.value.trim() !== input.getAttribute("data-confirm-name");
    }
  }

  document.addEventListener("change", function (evt) {
    var target = evt.target;
    if (target.matches("select[data-autosubmit]") && target.form) {
      target.form.requestSubmit();  // the header's switcher: one choice, one click
    }
    if (target.matches("[data-schedule-type]")) {
      syncScheduleInputs(target);
    }
    if (target.matches('select[name="task"]')) {
      var config = target.form && target.form.querySelector('textarea[name="config"]');
      document.querySelectorAll("[data-task-help]").forEach(function (block) {
        block.hidden = block.getAttribute("data-task-help") !== target.value;
        var fill = block.querySelector("[data-fill-example]");
        // Choosing a task fills its example into an empty config (or one still holding another
        // task's example); a config the operator typed is never overwritten.
        if (!block.hidden && fill && config && (config.value.trim() === "" || config.getAttribute("data-example-filled") === config.value)) {
          config.value = fill.getAttribute("data-fill-example");
          config.setAttribute("data-example-filled", config.value);
        }
      });
    }
    if (target.matches("[data-select-all]")) {
      var table = target.closest("table");
      (table || document).querySelectorAll('input[name="alert_ids"], input[name="ids"]').forEach(function (box) {
        box.checked = target.checked;
      });
    }
  });

  document.addEventListener("click", function (evt) {
    var fill = evt.target.closest && evt.target.closest("[data-fill-example]");
    if (fill) {
      var config = fill.form && fill.form.querySelector('textarea[name="config"]');
      if (config) {
        config.value = fill.getAttribute("data-fill-example");
        config.setAttribute("data-example-filled", config.value);
      }
    }
  });

  document.addEventListener("input", function (evt) {
    if (evt.target.matches("[data-confirm-name]")) {
      syncDeleteButton(evt.target);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var select = document.querySelector("[data-schedule-type]");
    if (select) {
      syncScheduleInputs(select);
    }
    document.querySelectorAll("[data-confirm-name]").forEach(syncDeleteButton);
  });
})();
