# Checks of symmar_tables (tools/print_tables.cc), run by ctest:
#   MODE=doc:     docs/tables.md (DOC) is exactly the tool's output for the built-in tables.
#   MODE=new_arch: a table file with made-up architectures (sm99, sm89) gets sections of its own,
#                 in arch order, each listing its rows and which rows the lookup chain serves the
#                 rest from - with no code edit naming those arches.
# Inputs: TOOL (symmar_tables), DOC (MODE=doc), WORK (a scratch directory, MODE=new_arch).
if(MODE STREQUAL "doc")
  execute_process(COMMAND ${TOOL} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "symmar_tables failed (${rc}): ${err}")
  endif()
  file(READ ${DOC} doc)
  if(NOT out STREQUAL doc)
    file(WRITE ${WORK}/tables.md.generated "${out}")
    message(FATAL_ERROR "${DOC} is stale: regenerate it with `build/tools/symmar_tables > docs/tables.md` "
                        "(the tool's output is in ${WORK}/tables.md.generated; diff the two)")
  endif()
elseif(MODE STREQUAL "new_arch")
  set(file ${WORK}/tables_new_arch.json)
  file(WRITE ${file} [=[{"rows": [
  {"arch": "sm99", "link": "nvswitch", "world": 8, "source": "made-up sm99",
   "algos": [{"algo": "twoshot", "max_bytes": "2K"}, {"algo": "multimem", "max_bytes": "8M"}]},
  {"arch": "sm89", "link": "pcie", "world": 2, "source": "made-up sm89",
   "algos": [{"algo": "oneshot", "max_bytes": 100}]}
]}
]=])
  execute_process(COMMAND ${TOOL} ${file} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "symmar_tables ${file} failed (${rc}): ${err}")
  endif()
  # Hand-written: sm99 has one row; the rest of nvswitch and all of nvlink/pcie fall to its family,
  # sm90 (which has no pcie-nop2p rows: the default's serve). sm89's family (sm80) has no rows, so
  # the default rows serve what sm89 lacks.
  set(sm99 [=[## sm99

| link | world | algorithms |
|---|---|---|
| nvswitch | 8 | twoshot ≤ 2 KiB, multimem ≤ 8 MiB |

Served by the lookup chain (no row here):
- nvswitch 2-7: sm90 rows
- nvlink 2-8: sm90 rows
- pcie 2-8: sm90 rows
- pcie-nop2p 2-8: default rows

Sources:
- nvswitch: made-up sm99

]=])
  set(sm89 [=[## sm89

| link | world | algorithms |
|---|---|---|
| pcie | 2 | oneshot ≤ 100 B |

Served by the lookup chain (no row here):
- nvswitch 2-8: default rows
- nvlink 2-8: default rows
- pcie 3-8: default rows
- pcie-nop2p 2-8: default rows

Sources:
- pcie: made-up sm89

]=])
  foreach(section sm99 sm89)
    string(FIND "${out}" "${${section}}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "no ${section} section as expected:\n${${section}}\nin the output:\n${out}")
    endif()
  endforeach()
  # Arch order: GPU arches ascending, then default and host.
  set(prev -1)
  foreach(heading sm89 sm90 sm99 sm100 sm121 default host)
    string(FIND "${out}" "\n## ${heading}\n" at)
    if(at LESS_EQUAL prev)
      message(FATAL_ERROR "section ${heading} missing or out of order (at ${at}, previous at ${prev})")
    endif()
    set(prev ${at})
  endforeach()
else()
  message(FATAL_ERROR "MODE must be doc or new_arch, not '${MODE}'")
endif()
