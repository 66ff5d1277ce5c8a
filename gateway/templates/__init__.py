"""URI templates of the definitions (`/store/{storeid}/desk/{cdid}`).

    template   `Template`: parse, render, match a value and capture its placeholders
    match      the regexes templates match with, linear in the value's length
"""
